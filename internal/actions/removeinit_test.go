package actions

import (
	"fmt"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestRemoveInitContainerPlan(t *testing.T) {
	req := Request{Params: v1alpha1.ActionParameters{Container: "base-os-bash"}}
	for _, tc := range []struct {
		kind, wantPatch string
	}{
		{"Deployment", `{"spec":{"template":{"spec":{"initContainers":[%s,%s]}}}}`},
		{"CronJob", `{"spec":{"jobTemplate":{"spec":{"template":{"spec":{"initContainers":[%s,%s]}}}}}}`},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			obj := workload(tc.kind, []any{initContainer("base-os-bash"), initContainer("setup")})
			p, err := removeInitContainer{}.Plan(obj, req)
			require.NoError(t, err)
			assert.False(t, p.NoOp)
			assert.Equal(t, "initContainers: base-os-bash, setup -> setup", Impact(p.Change))
			require.True(t, p.Rollback.Available)
			assert.Equal(t, "patch", p.Rollback.RollbackAction)
			c := `{"name":"%s","image":"busybox:1.37","command":["sh","-c","true"],"imagePullPolicy":"IfNotPresent","resources":{},"securityContext":{}}`
			want := fmt.Sprintf(tc.wantPatch, fmt.Sprintf(c, "base-os-bash"), fmt.Sprintf(c, "setup"))
			assert.JSONEq(t, want, string(p.Rollback.RollbackParameters.Patch.Raw))
			// The rollback is a valid request of the patch action.
			require.NoError(t, patch{}.Validate(Request{Params: *p.Rollback.RollbackParameters}))
		})
	}

	last, err := removeInitContainer{}.Plan(workload("Job", []any{initContainer("base-os-bash")}), req)
	require.NoError(t, err)
	assert.Equal(t, "initContainers: base-os-bash -> none", Impact(last.Change))

	for name, obj := range map[string][]any{"other containers only": {initContainer("setup")}, "no init containers": nil} {
		p, err := removeInitContainer{}.Plan(workload("Deployment", obj), req)
		require.NoError(t, err)
		assert.True(t, p.NoOp, name)
	}
}

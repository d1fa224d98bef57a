package actions

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestMigrateOwnershipPlan(t *testing.T) {
	one := []any{initContainer("base-os-bash")}
	split := workload("Deployment", one, entry("remedy", metav1.ManagedFieldsOperationApply, applierImage), entry("Go-http-client", metav1.ManagedFieldsOperationUpdate, updaterRest))
	for _, tc := range []struct {
		name                string
		req                 Request
		wantBefore, wantAft string
		wantNoOp            bool
	}{
		{"split", Request{}, "owners: Go-http-client, remedy", "owners: remedy", false},
		{"other field manager", Request{Params: v1alpha1.ActionParameters{FieldManager: "eno"}}, "owners: Go-http-client, remedy", "owners: eno", false},
		{"absent scope", Request{Params: v1alpha1.ActionParameters{Scope: "spec.template.spec.volumes"}}, "owners: none", "owners: none", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := migrateOwnership{}.Plan(split, tc.req)
			require.NoError(t, err)
			assert.Equal(t, tc.wantBefore, p.Change.Before)
			assert.Equal(t, tc.wantAft, p.Change.After)
			assert.Equal(t, tc.wantNoOp, p.NoOp)
			assert.Equal(t, "ownership migrated", p.Change.Action)
			assert.False(t, p.Rollback.Available)
			assert.Contains(t, p.Rollback.Reason, "displaced managers")
			assert.Empty(t, p.Patch, "the write is a server-side apply, made by Apply")
		})
	}
	done, err := migrateOwnership{}.Plan(workload("Deployment", one, entry("remedy", metav1.ManagedFieldsOperationApply, ownsAll)), Request{})
	require.NoError(t, err)
	assert.True(t, done.NoOp)
	assert.Equal(t, "owners: remedy -> owners: remedy", done.Change.Before+" -> "+done.Change.After)
}

func TestOwnershipActionsValidate(t *testing.T) {
	dep := v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	for _, tc := range []struct {
		name    string
		req     Request
		wantErr string
	}{
		{"migrate defaults", Request{Action: "migrate-field-ownership", Target: dep}, ""},
		{"migrate custom scope", Request{Action: "migrate-field-ownership", Target: dep, Params: v1alpha1.ActionParameters{Scope: "spec.template.spec.containers", FieldManager: "eno"}}, ""},
		{"migrate cronjob", Request{Action: "migrate-field-ownership", Target: v1alpha1.ObjectRef{APIVersion: "batch/v1", Kind: "CronJob", Name: "c"}}, ""},
		{"migrate metadata", Request{Action: "migrate-field-ownership", Target: dep, Params: v1alpha1.ActionParameters{Scope: "metadata.labels"}}, "dotted field path under spec"},
		{"migrate bad path", Request{Action: "migrate-field-ownership", Target: dep, Params: v1alpha1.ActionParameters{Scope: "spec..x"}}, "dotted field path under spec"},
		{"migrate padded manager", Request{Action: "migrate-field-ownership", Target: dep, Params: v1alpha1.ActionParameters{FieldManager: " remedy"}}, "fieldManager"},
		{"migrate pod", Request{Action: "migrate-field-ownership", Target: v1alpha1.ObjectRef{APIVersion: "v1", Kind: "Pod", Name: "p"}}, "does not support target kind Pod"},
		{"remove ok", Request{Action: "remove-init-container", Target: dep, Params: v1alpha1.ActionParameters{Container: "base-os-bash"}}, ""},
		{"remove without container", Request{Action: "remove-init-container", Target: dep}, "needs parameters.container"},
		{"remove with scope", Request{Action: "remove-init-container", Target: dep, Params: v1alpha1.ActionParameters{Container: "x", Scope: "spec.template.spec.containers"}}, "parameters.scope is for migrate-field-ownership"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Validate(tc.req)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			var inv *InvalidError
			require.ErrorAs(t, err, &inv)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

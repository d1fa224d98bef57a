package actions

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

func live(uid, rv string, replicas int64) *unstructured.Unstructured {
	obj := deployment(replicas, "")
	obj.SetUID(types.UID("uid-" + uid))
	obj.SetResourceVersion(rv)
	return obj
}

func TestGuardRecognisesALandedWrite(t *testing.T) {
	scaleTo5 := &Plan{UID: "uid-a", ResourceVersion: "42", Patch: `{"spec":{"replicas":5}}`}
	deletePod := &Plan{UID: "uid-a", ResourceVersion: "42", Delete: true}
	for _, tc := range []struct {
		name   string
		prior  *Plan
		live   *unstructured.Unstructured
		noOp   bool
		landed bool
	}{
		{"no earlier attempt", nil, live("a", "43", 5), true, false},
		{"earlier attempt recorded nothing", &Plan{}, live("a", "43", 5), true, false},
		{"write did not land: pinned version unchanged", scaleTo5, live("a", "42", 2), false, false},
		{"write landed: new version at the result", scaleTo5, live("a", "43", 5), true, true},
		{"object moved on but short of the result", scaleTo5, live("a", "44", 3), false, false},
		{"object replaced since", scaleTo5, live("b", "50", 5), true, false},
		{"delete landed: object gone", deletePod, nil, false, true},
		{"delete landed: a replacement took the name", deletePod, live("b", "50", 1), false, true},
		{"delete did not land", deletePod, live("a", "42", 1), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := Guard{Prior: tc.prior}
			if tc.live == nil {
				assert.Equal(t, tc.landed, g.deleted(nil))
				return
			}
			assert.Equal(t, tc.landed, g.applied(tc.live, Plan{NoOp: tc.noOp}))
		})
	}
}

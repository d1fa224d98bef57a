package gate

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

const denied = "<redacted: alice may not get configmaps/settings>"

// envPatch is an inverse patch that restores a container's env: a password
// written inline and one taken from a Secret.
const envPatch = `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[` +
	`{"name":"DB_PASSWORD","value":"hunter2"},{"name":"API_TOKEN","valueFrom":{"secretKeyRef":{"name":"api","key":"token"}}}]}]}}}}`

func TestReadableRedactsValues(t *testing.T) {
	change := v1alpha1.ResourceChange{Kind: "ConfigMap", Name: "settings", Action: "patched", Before: `data.password: "hunter2"`, After: `data.password: "new"`}
	for _, tc := range []struct {
		name       string
		r          Readable
		wantBefore string
	}{
		{"allowed shows the values", Readable{Allowed: true}, `data.password: "hunter2"`},
		{"denied shows the marker", Readable{Marker: denied}, denied},
		{"unknown shows nothing", Readable{}, unknownMarker},
		{"a Secret never shows", Readable{Marker: SecretMarker}, SecretMarker},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.r.Change(change)
			assert.Equal(t, tc.wantBefore, got.Before)
			assert.Equal(t, tc.r.Allowed, got.After == change.After)
			assert.Equal(t, "settings", got.Name, "what was changed stays named")
			assert.Equal(t, "", tc.r.Value(""), "nothing stays nothing")
		})
	}
}

func TestReadableRollback(t *testing.T) {
	info := v1alpha1.RollbackInformation{Available: true, RollbackAction: "patch",
		RollbackParameters: &v1alpha1.ActionParameters{Patch: &apiextensionsv1.JSON{Raw: []byte(envPatch)}}}

	shown := Readable{Allowed: true}.Rollback(info, "hmac-sha256:ab")
	assert.Equal(t, "hmac-sha256:ab", shown.ParametersDigest)
	require.NotNil(t, shown.RollbackParameters)
	raw := string(shown.RollbackParameters.Patch.Raw)
	assert.Contains(t, raw, "hunter2", "an inline value shows to a requester who may get the target")
	assert.NotContains(t, raw, "secretKeyRef", "valueFrom never shows")
	assert.Contains(t, raw, actions.SecretRefMarker)
	assert.Contains(t, string(info.RollbackParameters.Patch.Raw), "secretKeyRef", "the captured inverse itself is left alone")

	hidden := Readable{Marker: denied}.Rollback(info, "hmac-sha256:ab")
	assert.Nil(t, hidden.RollbackParameters)
	assert.Equal(t, denied, hidden.Redacted)
	assert.Equal(t, "patch", hidden.RollbackAction, "the inverse action stays named")
	assert.True(t, hidden.Available)
	assert.Equal(t, "hmac-sha256:ab", hidden.ParametersDigest)

	none := Readable{Marker: denied}.Rollback(v1alpha1.RollbackInformation{Reason: "a rolling restart cannot be undone"}, "")
	assert.Equal(t, "a rolling restart cannot be undone", none.Reason)
	assert.Empty(t, none.Redacted)
}

func TestRollbackDigest(t *testing.T) {
	key, other := []byte("0123456789abcdef0123456789abcdef"), []byte("another key of the same length!!")
	patch := func(raw string) v1alpha1.ActionParameters {
		return v1alpha1.ActionParameters{Patch: &apiextensionsv1.JSON{Raw: []byte(raw)}}
	}
	d, err := RollbackDigest(key, patch(`{"data":{"b":"2","a":"1"}}`))
	require.NoError(t, err)
	assert.Regexp(t, `^hmac-sha256:[0-9a-f]{64}$`, d)

	same, err := RollbackDigest(key, patch("{ \"data\" : {\"a\":\"1\", \"b\":\"2\"} }"))
	require.NoError(t, err)
	assert.Equal(t, d, same, "key order and spacing do not matter")
	changed, _ := RollbackDigest(key, patch(`{"data":{"a":"1","b":"3"}}`))
	assert.NotEqual(t, d, changed)
	otherKey, _ := RollbackDigest(other, patch(`{"data":{"a":"1","b":"2"}}`))
	assert.NotEqual(t, d, otherKey, "the digest depends on the run's key")

	big, _ := RollbackDigest(key, v1alpha1.ActionParameters{Replicas: ptr.To[int32](2147483647)})
	bigger, _ := RollbackDigest(key, v1alpha1.ActionParameters{Replicas: ptr.To[int32](2147483646)})
	assert.NotEqual(t, big, bigger, "numbers are compared as written")
}

// The gate recognises a rollback by its digest: the status's parameters
// (redacted or not) are not what it compares, and without the run's key no
// parameters pass.
func TestGateMatchesARollbackByItsDigest(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	scale := func(n int32) actions.Request {
		return actions.Request{Action: "scale", Params: v1alpha1.ActionParameters{Replicas: ptr.To(n)}}
	}
	digest, err := RollbackDigest(key, scale(3).Params)
	require.NoError(t, err)
	k := &v1alpha1.KubernetesExecution{Status: v1alpha1.KubernetesExecutionStatus{RollbackInformation: &v1alpha1.RollbackInformation{
		Available: true, RollbackAction: "scale", ParametersDigest: digest, Redacted: denied,
	}}}
	assert.True(t, isRollbackOf(k, scale(3), key), "the captured inverse with the run's key")
	assert.False(t, isRollbackOf(k, scale(4), key), "other parameters")
	assert.False(t, isRollbackOf(k, scale(3), nil), "no key")
	assert.False(t, isRollbackOf(k, scale(3), []byte("a forger's key, of the same size!")), "another key")

	shown := k.DeepCopy()
	shown.Status.RollbackInformation.RollbackParameters = &v1alpha1.ActionParameters{Replicas: ptr.To[int32](9)}
	assert.False(t, isRollbackOf(shown, scale(9), nil), "the published parameters do not stand in for the digest")
}

func TestMayReadTarget(t *testing.T) {
	kube := kubefake.NewClientset()
	var asked []authorizationv1.SubjectAccessReviewSpec
	kube.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		asked = append(asked, sar.Spec)
		sar.Status.Allowed = sar.Spec.User == "bob"
		return true, sar, nil
	})
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Secret"), meta.RESTScopeNamespace)
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&Validation{Kube: kube, Mapper: mapper})
	settings := v1alpha1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "settings"}
	ask := func(user string, target v1alpha1.ObjectRef) Readable {
		t.Helper()
		v, err := env.ExecuteActivity((&Validation{}).MayReadTarget, RequesterCheck{Namespace: "shop", Target: target, Action: "patch",
			Requester: &v1alpha1.Requester{Username: user, UID: "uid-" + user, Groups: []string{"oncall", "system:authenticated"}}})
		require.NoError(t, err)
		var r Readable
		require.NoError(t, v.Get(&r))
		return r
	}

	assert.Equal(t, Readable{Marker: denied}, ask("alice", settings))
	require.Len(t, asked, 1)
	assert.Equal(t, authorizationv1.SubjectAccessReviewSpec{User: "alice", UID: "uid-alice", Groups: []string{"oncall", "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "shop", Verb: "get", Resource: "configmaps", Name: "settings"}}, asked[0],
		"asked as the requester, for get on the very object")

	assert.Equal(t, Readable{Allowed: true}, ask("bob", settings))

	secret := settings
	secret.Kind = "Secret"
	assert.Equal(t, Readable{Marker: SecretMarker}, ask("bob", secret), "a Secret never shows, whatever the grants")
	assert.Len(t, asked, 2, "nothing to ask for a Secret")

	raw, err := json.Marshal(Readable{})
	require.NoError(t, err)
	assert.JSONEq(t, `{"allowed":false}`, string(raw))
}

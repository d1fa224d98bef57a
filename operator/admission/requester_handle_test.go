package admission

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/remedy-dev/remedy/internal/authz"
	"github.com/remedy-dev/remedy/internal/policy"
)

// requesterFixture is the webhook with a fake authorizer: grants are
// "user verb resource name" (every namespace), and asked records each review.
type requesterFixture struct {
	h      *Requester
	grants []string
	asked  []string
}

func newRequesterFixture(t *testing.T, grants ...string) *requesterFixture {
	t.Helper()
	// As RegisterOperatorWebhooks: the schemas are built before the first review.
	_, err := schemas()
	require.NoError(t, err)
	f := &requesterFixture{grants: grants}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	review := func(_ context.Context, s authorizationv1.SubjectAccessReviewSpec) (bool, error) {
		a := s.ResourceAttributes
		grant := strings.Join([]string{s.User, a.Verb, a.Resource, a.Name}, " ")
		f.asked = append(f.asked, grant)
		for _, g := range f.grants {
			if g == grant {
				return true, nil
			}
		}
		return false, nil
	}
	sch := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(sch))
	namespaces := fake.NewClientBuilder().WithScheme(sch).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "payments"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "core", Labels: map[string]string{"remedy.dev/protected": "true"}}},
	).Build()
	f.h = &Requester{
		Authorize:      func(ctx context.Context, r authz.Request) error { return authz.Authorize(ctx, review, mapper, r) },
		Namespaces:     namespaces,
		CheckCondition: policy.NewEngine().CheckCondition,
		Worker:         "system:serviceaccount:remedy-system:remedy-worker",
	}
	return f
}

func (f *requesterFixture) handle(t *testing.T, kind string, op admissionv1.Operation, user string, obj, old string) admission.Response {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Kind: metav1.GroupVersionKind{Group: "remedy.dev", Version: "v1alpha1", Kind: kind}, Operation: op,
		Namespace: "payments", Name: "x", UserInfo: authenticationv1.UserInfo{Username: user},
	}}
	req.Object.Raw = []byte(obj)
	if old != "" {
		req.OldObject.Raw = []byte(old)
	}
	return f.h.Handle(context.Background(), req)
}

// refused asserts a refusal with code whose message and causes name each of want.
func refused(t *testing.T, resp admission.Response, code int32, want ...string) {
	t.Helper()
	require.False(t, resp.Allowed, "admitted")
	require.NotNil(t, resp.Result)
	assert.Equal(t, code, resp.Result.Code, resp.Result.Message)
	for _, w := range want {
		assert.Contains(t, resp.Result.Message, w)
	}
	if code == http.StatusUnprocessableEntity {
		assert.Equal(t, metav1.StatusReasonInvalid, resp.Result.Reason)
		require.NotNil(t, resp.Result.Details)
		assert.NotEmpty(t, resp.Result.Details.Causes, "kubectl prints the causes")
	}
	assert.NotContains(t, resp.Result.Message, "Go struct")
}

// patched returns the admitted object after the webhook's patch.
func patched(t *testing.T, resp admission.Response, obj string) map[string]any {
	t.Helper()
	require.True(t, resp.Allowed, "%+v", resp.Result)
	doc := map[string]any{}
	require.NoError(t, json.Unmarshal([]byte(obj), &doc))
	for _, op := range resp.Patches {
		parts := strings.Split(strings.TrimPrefix(op.Path, "/"), "/")
		m := doc
		for _, p := range parts[:len(parts)-1] {
			p = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		last := strings.ReplaceAll(strings.ReplaceAll(parts[len(parts)-1], "~1", "/"), "~0", "~")
		if op.Operation == "remove" {
			delete(m, last)
		} else {
			m[last] = op.Value
		}
	}
	return doc
}

const (
	scaleWeb = `"spec":{"action":"scale","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"payments","name":"web"},"parameters":{"replicas":3}}`
	// rolledBackable is an execution RollbackReady with the inverse scale captured.
	rolledBackable = `{"metadata":{"name":"x","namespace":"payments"},` + scaleWeb +
		`,"status":{"phase":"RollbackReady","rollbackInformation":{"available":true,"rollbackAction":"scale","rollbackParameters":{"replicas":1}}}}`
)

func TestRequesterRollbackReadsOnlyTheOldObject(t *testing.T) {
	const forged = `{"metadata":{"name":"x","namespace":"payments","annotations":{"remedy.dev/rollback":"undo","remedy.dev/rollback-requester":"system:admin"}},` +
		scaleWeb + `,"status":{"rollbackInformation":{"available":true,"rollbackAction":"explode"}}}`

	t.Run("a body status with an unknown rollbackAction is not read", func(t *testing.T) {
		f := newRequesterFixture(t)
		refused(t, f.handle(t, "KubernetesExecution", admissionv1.Update, "mallory", forged, rolledBackable), http.StatusForbidden,
			`rollback: user "mallory" cannot execute`, `actions.remedy.dev/scale`)
		assert.Contains(t, f.asked, "mallory execute actions scale", "authorized for the stored inverse action")
	})
	t.Run("the record is the authenticated user", func(t *testing.T) {
		f := newRequesterFixture(t, "ollie execute actions scale")
		doc := patched(t, f.handle(t, "KubernetesExecution", admissionv1.Update, "ollie", forged, rolledBackable), forged)
		ann := doc["metadata"].(map[string]any)["annotations"].(map[string]any)
		assert.Equal(t, "ollie", ann["remedy.dev/rollback-requester"])
	})
	t.Run("no rollback information in the stored status", func(t *testing.T) {
		f := newRequesterFixture(t, "ollie execute actions scale")
		old := `{"metadata":{"name":"x","namespace":"payments"},` + scaleWeb + `,"status":{"phase":"Validating"}}`
		refused(t, f.handle(t, "KubernetesExecution", admissionv1.Update, "ollie", forged, old), http.StatusUnprocessableEntity,
			`metadata.annotations[remedy.dev/rollback]: Forbidden: KubernetesExecution x has nothing to roll back: its status has no rollbackInformation (it is Validating)`)
		assert.Empty(t, f.asked)
	})
	t.Run("an action with no inverse", func(t *testing.T) {
		f := newRequesterFixture(t)
		old := `{"metadata":{"name":"x","namespace":"payments"},` + scaleWeb + `,"status":{"rollbackInformation":{"available":false,"reason":"a deleted pod is recreated by its controller"}}}`
		refused(t, f.handle(t, "KubernetesExecution", admissionv1.Update, "ollie", forged, old), http.StatusUnprocessableEntity,
			"has no rollback: a deleted pod is recreated by its controller")
	})
	t.Run("a hand-written record without a rollback is removed", func(t *testing.T) {
		f := newRequesterFixture(t)
		obj := `{"metadata":{"name":"x","annotations":{"remedy.dev/rollback-requester":"system:admin"}},` + scaleWeb + `}`
		doc := patched(t, f.handle(t, "KubernetesExecution", admissionv1.Update, "mallory", obj, rolledBackable), obj)
		assert.NotContains(t, doc["metadata"].(map[string]any)["annotations"], "remedy.dev/rollback-requester")
	})
	t.Run("an unchanged rollback keeps the stored record", func(t *testing.T) {
		f := newRequesterFixture(t)
		old := `{"metadata":{"name":"x","annotations":{"remedy.dev/rollback":"undo","remedy.dev/rollback-requester":"ollie"}},` + scaleWeb + `}`
		obj := `{"metadata":{"name":"x","annotations":{"remedy.dev/rollback":"undo","remedy.dev/rollback-requester":"system:admin"}},` + scaleWeb + `}`
		doc := patched(t, f.handle(t, "KubernetesExecution", admissionv1.Update, "mallory", obj, old), obj)
		assert.Equal(t, "ollie", doc["metadata"].(map[string]any)["annotations"].(map[string]any)["remedy.dev/rollback-requester"])
		assert.Empty(t, f.asked)
	})
}

func TestRequesterRefusesMalformedInput(t *testing.T) {
	const admin = `"requester":{"username":"system:admin","groups":["system:masters"]}`
	target := func(apiVersion, kind string) string {
		return `{"apiVersion":"` + apiVersion + `","kind":"` + kind + `","namespace":"payments","name":"web"}`
	}
	for _, tc := range []struct {
		name, kind, obj string
		code            int32
		want            []string
	}{
		{name: "replicas as a word", kind: "KubernetesExecution", code: http.StatusUnprocessableEntity,
			obj:  `{"spec":{"action":"scale","target":` + target("apps/v1", "Deployment") + `,"parameters":{"replicas":"three"},` + admin + `}}`,
			want: []string{`spec.parameters.replicas: Invalid value: "three": must be of type integer (int32)`}},
		{name: "lower-case kind", kind: "KubernetesExecution", code: http.StatusUnprocessableEntity,
			obj:  `{"spec":{"action":"scale","target":` + target("apps/v1", "deployment") + `,"parameters":{"replicas":3},` + admin + `}}`,
			want: []string{`spec.target.kind: Invalid value: "deployment"`, "did you mean apiVersion apps/v1, kind Deployment?"}},
		{name: "unserved apiVersion", kind: "KubernetesExecution", code: http.StatusUnprocessableEntity,
			obj:  `{"spec":{"action":"scale","target":` + target("apps/v2", "Deployment") + `,"parameters":{"replicas":3},` + admin + `}}`,
			want: []string{`spec.target.apiVersion: Invalid value: "apps/v2"`, "it serves it in apps/v1"}},
		{name: "unknown action", kind: "KubernetesExecution", code: http.StatusUnprocessableEntity,
			obj:  `{"spec":{"action":"explode","target":` + target("apps/v1", "Deployment") + `}}`,
			want: []string{`spec.action: Unsupported value: "explode"`}},
		{name: "bad rego", kind: "KubernetesExecution", code: http.StatusUnprocessableEntity,
			obj:  `{"spec":{"action":"scale","target":` + target("apps/v1", "Deployment") + `,"parameters":{"replicas":3},"postConditions":[{"name":"ok","rego":"package ok\npass := true"},{"name":"typo","rego":"package typo\npass if {"}]}}`,
			want: []string{"spec.postConditions[1].rego: Invalid value: condition typo: rego:"}},
		{name: "protected namespace", kind: "KubernetesExecution", code: http.StatusForbidden,
			obj:  `{"spec":{"action":"scale","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"core","name":"web"},"parameters":{"replicas":3}}}`,
			want: []string{"namespace core is protected"}},
		{name: "a malformed first step and a forbidden second step", kind: "RemediationRequest", code: http.StatusUnprocessableEntity,
			obj: `{"spec":{"steps":[{"name":"up","execution":{"action":"scale","target":` + target("apps/v1", "deployment") + `,"parameters":{"replicas":3}}},` +
				`{"name":"image","execution":{"action":"set-image","target":` + target("apps/v1", "Deployment") + `,"parameters":{"container":"web","image":"evil:1"}}}],` + admin + `}}`,
			want: []string{`spec.steps[0].execution.target.kind: Invalid value: "deployment"`,
				`spec.steps[1].execution: Forbidden: step image: user "mallory" cannot execute resource "actions"`}},
		{name: "a step's replicas as a word", kind: "RemediationRequest", code: http.StatusUnprocessableEntity,
			obj:  `{"spec":{"steps":[{"name":"up","execution":{"action":"scale","target":` + target("apps/v1", "Deployment") + `,"parameters":{"replicas":"three"}}}]}}`,
			want: []string{`spec.steps[0].execution.parameters.replicas: Invalid value: "three"`}},
		{name: "a forbidden later step", kind: "RemediationRequest", code: http.StatusForbidden,
			obj: `{"spec":{"steps":[{"name":"up","execution":{"action":"scale","target":` + target("apps/v1", "Deployment") + `,"parameters":{"replicas":3}}},` +
				`{"name":"image","execution":{"action":"set-image","target":` + target("apps/v1", "Deployment") + `,"parameters":{"container":"web","image":"evil:1"}}}]}}`,
			want: []string{`step image: user "mallory" cannot execute`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRequesterFixture(t, "mallory execute actions scale")
			refused(t, f.handle(t, tc.kind, admissionv1.Create, "mallory", tc.obj, ""), tc.code, tc.want...)
		})
	}
}

func TestRequesterStampsTheUser(t *testing.T) {
	f := newRequesterFixture(t, "olga execute actions scale")
	obj := `{"metadata":{"name":"x","annotations":{"remedy.dev/rollback-requester":"system:admin"}},"spec":{"action":"scale","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"payments","name":"web"},` +
		`"parameters":{"replicas":3},"preConditions":[{"name":"ok","rego":"package ok\npass := true"}],"requester":{"username":"system:admin"}}}`
	doc := patched(t, f.handle(t, "KubernetesExecution", admissionv1.Create, "olga", obj, ""), obj)
	assert.Equal(t, map[string]any{"username": "olga"}, doc["spec"].(map[string]any)["requester"])
	assert.NotContains(t, doc["metadata"].(map[string]any)["annotations"], "remedy.dev/rollback-requester")

	withRollback := `{"metadata":{"name":"x","annotations":{"remedy.dev/rollback":"now"}},` + scaleWeb + `}`
	refused(t, f.handle(t, "KubernetesExecution", admissionv1.Create, "olga", withRollback, ""), http.StatusUnprocessableEntity,
		"metadata.annotations[remedy.dev/rollback]: Forbidden: a rollback is asked for once the run is RollbackReady")
}

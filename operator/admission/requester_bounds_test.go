package admission

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/remedy-dev/remedy/internal/authz"
	"github.com/remedy-dev/remedy/internal/policy"
)

// withConditions is scaleWeb with one postcondition per module.
func withConditions(modules ...string) string {
	var conds []string
	for i, m := range modules {
		conds = append(conds, fmt.Sprintf(`{"name":"c%d","rego":%q}`, i, m))
	}
	return `{"spec":{"action":"scale","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"payments","name":"web"},` +
		`"parameters":{"replicas":3},"postConditions":[` + strings.Join(conds, ",") + `]}}`
}

// bigModule is a valid module of about n bytes.
func bigModule(n int) string {
	var b strings.Builder
	b.WriteString("package big\n\npass := true\n")
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "r%d := %d\n", i, i)
	}
	return b.String()
}

func TestRequesterAuthorizesBeforeItCompiles(t *testing.T) {
	var compiled atomic.Int32
	counting := func(f *requesterFixture) {
		check := f.h.CheckCondition
		f.h.CheckCondition = func(ctx context.Context, name, module string) error {
			compiled.Add(1)
			return check(ctx, name, module)
		}
	}
	t.Run("an unauthorized requester's module is never compiled", func(t *testing.T) {
		compiled.Store(0)
		f := newRequesterFixture(t)
		counting(f)
		refused(t, f.handle(t, "KubernetesExecution", admissionv1.Create, "mallory", withConditions(bigModule(60<<10)), ""), http.StatusForbidden,
			`user "mallory" cannot execute`)
		assert.Zero(t, compiled.Load())
	})
	t.Run("an unauthorized requester's huge module is refused at once", func(t *testing.T) {
		compiled.Store(0)
		f := newRequesterFixture(t)
		counting(f)
		start := time.Now()
		resp := f.handle(t, "KubernetesExecution", admissionv1.Create, "mallory", withConditions(bigModule(3<<19)), "")
		took := time.Since(start)
		refused(t, resp, http.StatusUnprocessableEntity, "over Remedy's limit of 65536 bytes")
		assert.Zero(t, compiled.Load())
		assert.Less(t, took, time.Second)
		t.Logf("1.5 MiB module refused in %s", took)
	})
	t.Run("an authorized requester's over-size module names the bound", func(t *testing.T) {
		compiled.Store(0)
		f := newRequesterFixture(t, "olga execute actions scale")
		counting(f)
		refused(t, f.handle(t, "KubernetesExecution", admissionv1.Create, "olga", withConditions(bigModule(policy.MaxConditionBytes+1)), ""),
			http.StatusUnprocessableEntity, `spec.postConditions[0].rego`, `condition "c0" is`, "over Remedy's limit of 65536 bytes (64 KiB) per condition")
		assert.Zero(t, compiled.Load())
	})
	t.Run("an authorized requester's module within the bound compiles", func(t *testing.T) {
		compiled.Store(0)
		f := newRequesterFixture(t, "olga execute actions scale")
		counting(f)
		obj := withConditions(bigModule(60 << 10))
		patched(t, f.handle(t, "KubernetesExecution", admissionv1.Create, "olga", obj, ""), obj)
		assert.EqualValues(t, 1, compiled.Load())
	})
	t.Run("compilation stops at the budget", func(t *testing.T) {
		f := newRequesterFixture(t, "olga execute actions scale")
		f.h.CompileBudget = 100 * time.Millisecond
		f.h.CheckCondition = func(ctx context.Context, _, _ string) error {
			<-ctx.Done()
			return ctx.Err()
		}
		start := time.Now()
		refused(t, f.handle(t, "KubernetesExecution", admissionv1.Create, "olga", withConditions("package a\npass := true", "package b\npass := true", "package c\npass := true"), ""),
			http.StatusUnprocessableEntity, `condition "c1" was not compiled`, "budget of 100ms")
		assert.Less(t, time.Since(start), time.Second, "three conditions share one budget")
	})
}

// A kind matched by name alone would authorize a same-named kind of another
// group with no verb at all; it is refused before any grant is asked.
func TestRequesterRefusesAKindOfAnotherGroup(t *testing.T) {
	f := newRequesterFixture(t)
	f.h.Authorize = func(ctx context.Context, r authz.Request) error {
		mapper := meta.NewDefaultRESTMapper(nil)
		mapper.Add(schema.GroupVersionKind{Group: "evil.example.com", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
		return authz.Authorize(ctx, func(context.Context, authorizationv1.SubjectAccessReviewSpec) (bool, error) { return false, nil }, mapper, r)
	}
	obj := `{"spec":{"action":"scale","target":{"apiVersion":"evil.example.com/v1","kind":"Deployment","namespace":"payments","name":"web"},"parameters":{"replicas":3}}}`
	refused(t, f.handle(t, "KubernetesExecution", admissionv1.Create, "mallory", obj, ""), http.StatusUnprocessableEntity,
		`spec.target.apiVersion: Invalid value: "evil.example.com/v1"`, "supports kind Deployment only in apiVersion apps/v1")
}

// The requester's extra is recorded and carried by every review made for them.
func TestRequesterCarriesExtra(t *testing.T) {
	f := newRequesterFixture(t, "olga execute actions scale")
	var extras []map[string][]string
	review := f.h.Authorize
	f.h.Authorize = func(ctx context.Context, r authz.Request) error {
		extras = append(extras, r.Requester.Extra)
		return review(ctx, r)
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Kind: metav1.GroupVersionKind{Group: "remedy.dev", Version: "v1alpha1", Kind: "KubernetesExecution"}, Operation: admissionv1.Create,
		Namespace: "payments", Name: "x",
		UserInfo: authenticationv1.UserInfo{Username: "olga", Extra: map[string]authenticationv1.ExtraValue{"scopes.example.com": {"read-only"}}},
	}}
	obj := `{"metadata":{"name":"x"},` + scaleWeb + `}`
	req.Object.Raw = []byte(obj)
	doc := patched(t, f.h.Handle(context.Background(), req), obj)
	assert.Equal(t, map[string]any{"username": "olga", "extra": map[string]any{"scopes.example.com": []any{"read-only"}}}, doc["spec"].(map[string]any)["requester"])
	require.Len(t, extras, 1)
	assert.Equal(t, map[string][]string{"scopes.example.com": {"read-only"}}, extras[0])
}

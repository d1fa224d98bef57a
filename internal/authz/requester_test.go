package authz

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

func TestAuthorize(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Node"}, meta.RESTScopeRoot)
	// A CRD's kind named like a built-in one.
	mapper.Add(schema.GroupVersionKind{Group: "evil.example.com", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	// Discovery's mapper also maps each kind spelt in lower case (client-go restmapper).
	rs, rsList, rsOne := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"},
		schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicaset"}
	mapper.AddSpecific(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "replicaset"}, rsList, rsOne, meta.RESTScopeNamespace)
	mapper.AddSpecific(rs, rsList, rsOne, meta.RESTScopeNamespace)
	deploy := v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "payments", Name: "api"}
	node := v1alpha1.ObjectRef{APIVersion: "v1", Kind: "Node", Name: "n1"}
	alice := v1alpha1.Requester{Username: "alice", Groups: []string{"oncall"}}

	// grants is what the fake authorizer allows: "verb resource namespace name".
	cases := []struct {
		name    string
		req     Request
		grants  []string
		wantErr string
		// malformed errors are bad input, left to the schema; the rest are refusals.
		malformed bool
	}{
		{name: "execute grant", req: Request{Requester: alice, Namespace: "payments", Action: "scale", Target: deploy},
			grants: []string{"execute actions payments scale"}},
		{name: "own verbs", req: Request{Requester: alice, Namespace: "payments", Action: "scale", Target: deploy},
			grants: []string{"get deployments payments api", "patch deployments payments api"}},
		{name: "one verb missing", req: Request{Requester: alice, Namespace: "payments", Action: "scale", Target: deploy},
			grants: []string{"get deployments payments api"}, wantErr: `cannot patch deployments.apps "api" itself`},
		{name: "another namespace", req: Request{Requester: alice, Namespace: "tenant-a", Action: "scale", Target: deploy},
			grants: []string{"execute actions payments scale"}, wantErr: `only in the requesting object's own namespace "tenant-a"`},
		{name: "a namespaced grant is not a Node grant", req: Request{Requester: alice, Namespace: "tenant-a", Action: "cordon", Target: node},
			grants: []string{"execute actions tenant-a cordon"}, wantErr: "at cluster scope"},
		{name: "cluster grant for a Node", req: Request{Requester: alice, Namespace: "tenant-a", Action: "cordon", Target: node},
			grants: []string{"execute actions  cordon"}},
		{name: "unknown action", req: Request{Requester: alice, Namespace: "payments", Action: "reboot", Target: deploy},
			wantErr: `action: Unsupported value: "reboot": supported values: "cordon", `, malformed: true},
		{name: "an unknown action and an unserved target, named together", req: Request{Requester: alice, Namespace: "payments", Action: "reboot",
			Target: v1alpha1.ObjectRef{APIVersion: "apps/v2", Kind: "Deployment", Namespace: "payments", Name: "api"}},
			wantErr: `[action: Unsupported value: "reboot": supported values: "cordon", `, malformed: true},
		{name: "no namespace", req: Request{Requester: alice, Namespace: "payments", Action: "scale", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "api"}},
			wantErr: "target.namespace: Required value: kind Deployment is namespaced", malformed: true},
		{name: "no target", req: Request{Requester: alice, Namespace: "payments", Action: "scale"}, wantErr: "target: Required value", malformed: true},
		{name: "unserved kind", req: Request{Requester: alice, Namespace: "payments", Action: "patch", Target: v1alpha1.ObjectRef{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "payments", Name: "w"}},
			wantErr: `target.kind: Invalid value: "Widget": the API server serves no kind Widget in example.com/v1`, malformed: true},
		{name: "unserved version", req: Request{Requester: alice, Namespace: "payments", Action: "scale", Target: v1alpha1.ObjectRef{APIVersion: "apps/v2", Kind: "Deployment", Namespace: "payments", Name: "api"}},
			wantErr: `target.apiVersion: Invalid value: "apps/v2": the API server does not serve kind Deployment in apps/v2; it serves it in apps/v1`, malformed: true},
		{name: "lower-case kind", req: Request{Requester: alice, Namespace: "payments", Action: "scale", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "deployment", Namespace: "payments", Name: "api"}},
			wantErr: `target.kind: Invalid value: "deployment": the API server serves no kind deployment in apps/v1 (kinds are case-sensitive): did you mean apiVersion apps/v1, kind Deployment?`, malformed: true},
		{name: "a kind the mapper matched regardless of case", req: Request{Requester: alice, Namespace: "payments", Action: "scale", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "replicaset", Namespace: "payments", Name: "api"}},
			wantErr: `target.kind: Invalid value: "replicaset": the API server serves no kind replicaset in apps/v1 (kinds are case-sensitive): did you mean apiVersion apps/v1, kind ReplicaSet?`, malformed: true},
		{name: "a same-named kind of another group", req: Request{Requester: alice, Namespace: "payments", Action: "scale", Target: v1alpha1.ObjectRef{APIVersion: "evil.example.com/v1", Kind: "Deployment", Namespace: "payments", Name: "api"}},
			wantErr: `target.apiVersion: Invalid value: "evil.example.com/v1": action scale supports kind Deployment only in apiVersion apps/v1`, malformed: true},
		{name: "a kind the action does not support", req: Request{Requester: alice, Namespace: "tenant-a", Action: "scale", Target: node},
			wantErr: "action scale does not support target kind Node", malformed: true},
		{name: "a scoped token is asked for as scoped", req: Request{Requester: v1alpha1.Requester{Username: "alice", Groups: []string{"oncall"}, Extra: map[string][]string{"scopes.example.com": {"read-only"}}},
			Namespace: "payments", Action: "scale", Target: deploy},
			grants: []string{"execute actions payments scale"}},
		{name: "bad apiVersion", req: Request{Requester: alice, Namespace: "payments", Action: "scale", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1/x", Kind: "Deployment", Namespace: "payments", Name: "api"}},
			wantErr: `target.apiVersion: Invalid value: "apps/v1/x": must be group/version`, malformed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var review Review
			grant := func(_ context.Context, s authorizationv1.SubjectAccessReviewSpec) (bool, error) {
				require.Equal(t, alice.Username, s.User)
				require.Equal(t, alice.Groups, s.Groups)
				require.Equal(t, SARExtra(tc.req.Requester.Extra), s.Extra, "every review carries the requester's extra")
				a := s.ResourceAttributes
				return contains(tc.grants, a.Verb+" "+a.Resource+" "+a.Namespace+" "+a.Name), nil
			}
			asked := false
			review = func(ctx context.Context, s authorizationv1.SubjectAccessReviewSpec) (bool, error) {
				asked = true
				return grant(ctx, s)
			}
			err := Authorize(context.Background(), review, mapper, tc.req)
			if tc.malformed {
				assert.False(t, asked, "bad input is refused before any SubjectAccessReview")
			}
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			assert.Contains(t, err.Error(), tc.wantErr)
			var malformed *Malformed
			assert.Equal(t, tc.malformed, errors.As(err, &malformed), err.Error())
		})
	}
}

// An unknown action and an unserved target are named in one Malformed, each
// with its field, so one refusal names both.
func TestAuthorizeNamesEveryMalformedField(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	never := func(context.Context, authorizationv1.SubjectAccessReviewSpec) (bool, error) {
		t.Fatal("bad input is refused before any SubjectAccessReview")
		return false, nil
	}
	err := Authorize(context.Background(), never, mapper, Request{Requester: v1alpha1.Requester{Username: "alice"}, Namespace: "payments", Action: "reboot",
		Target: v1alpha1.ObjectRef{APIVersion: "apps/v2", Kind: "Deployment", Namespace: "payments", Name: "api"}})
	var m *Malformed
	require.ErrorAs(t, err, &m)
	var fields []string
	for _, f := range m.Under(field.NewPath("spec")) {
		fields = append(fields, f.Field)
	}
	assert.Equal(t, []string{"spec.action", "spec.target.apiVersion"}, fields)
}

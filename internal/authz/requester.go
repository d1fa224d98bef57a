// Package authz decides whether a requester may have Remedy run an action for
// them. The admission webhook asks it when an execution is created, and the
// workflow's validation asks again before anything changes, because RBAC can
// change while a run waits for approval.
package authz

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/remedy-dev/remedy/activities/actions"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// ExecuteVerb on ActionsResource (resourceName = the action) is the
// Kubernetes-native grant to have Remedy run that action, like "approve" on
// certificatesigningrequests.
const (
	ExecuteVerb     = "execute"
	ActionsResource = "actions"
)

// Review answers one SubjectAccessReview.
type Review func(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (bool, error)

// Request is one action a requester wants run from an object in Namespace.
type Request struct {
	Requester v1alpha1.Requester
	// Namespace of the KubernetesExecution or RemediationRequest.
	Namespace string
	Action    string
	Target    v1alpha1.ObjectRef
}

// Denied is a refusal whose message names the missing grant.
type Denied struct{ Msg string }

func (d *Denied) Error() string { return d.Msg }

// Malformed says the request cannot be authorized because it is bad input
// (an unknown action or kind, a namespaced target without a namespace). The
// admission webhook leaves it to the CRD schema and CEL, which run after
// mutating webhooks and name the problem; validation fails it InvalidParameters.
type Malformed struct{ Msg string }

func (m *Malformed) Error() string { return m.Msg }

// Authorize returns nil when the requester may run the action, a *Denied
// naming what is missing when not, and other errors when it could not ask.
//
// A namespaced target must be in the object's own namespace. Then either the
// requester holds ExecuteVerb on actions.remedy.dev/<action> in the target's
// namespace (cluster scope for cluster-scoped targets), or could make every
// write the action makes on the target themselves.
func Authorize(ctx context.Context, review Review, mapper meta.RESTMapper, r Request) error {
	a, ok := actions.Lookup(r.Action)
	if !ok {
		return &Malformed{Msg: fmt.Sprintf("action %q is not in Remedy's catalog", r.Action)}
	}
	gvr, namespaced, err := resourceOf(mapper, r.Target)
	if err != nil {
		return err
	}
	ns := ""
	if namespaced {
		ns = r.Target.Namespace
		if ns == "" {
			return &Malformed{Msg: fmt.Sprintf("target.namespace is required for kind %s", r.Target.Kind)}
		}
		if ns != r.Namespace {
			return &Denied{Msg: fmt.Sprintf("target %s is in namespace %q, but Remedy acts only in the requesting object's own namespace %q: create the execution in %q",
				r.Target.String(), ns, r.Namespace, ns)}
		}
	}
	ok, err = review(ctx, sarSpec(r.Requester, authorizationv1.ResourceAttributes{
		Namespace: ns, Verb: ExecuteVerb, Group: v1alpha1.GroupVersion.Group, Resource: ActionsResource, Name: r.Action,
	}))
	if err != nil || ok {
		return err
	}
	var missing []string
	for _, verb := range Verbs(a, gvr) {
		ok, err := review(ctx, sarSpec(r.Requester, authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Group: gvr.Group, Resource: gvr.Resource, Name: r.Target.Name,
		}))
		if err != nil {
			return err
		}
		if !ok {
			missing = append(missing, verb)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	where := "at cluster scope"
	if ns != "" {
		where = "in the namespace " + ns
	}
	return &Denied{Msg: fmt.Sprintf("user %q cannot execute resource %q in API group %q %s (resourceName %q), and cannot %s %s %q itself: "+
		"grant the verb %q on %s.%s/%s (see deploy/rbac/oncall-example.yaml)",
		r.Requester.Username, ActionsResource, v1alpha1.GroupVersion.Group, where, r.Action,
		strings.Join(missing, ", "), gvr.GroupResource(), r.Target.Name,
		ExecuteVerb, ActionsResource, v1alpha1.GroupVersion.Group, r.Action)}
}

// Verbs lists the verbs the action uses on the target's resource, in the order its rules name them.
func Verbs(a actions.Action, gvr schema.GroupVersionResource) []string {
	var verbs []string
	seen := map[string]bool{}
	for _, rule := range a.Rules() {
		if !contains(rule.APIGroups, gvr.Group) || !contains(rule.Resources, gvr.Resource) {
			continue
		}
		for _, v := range rule.Verbs {
			if !seen[v] {
				seen[v] = true
				verbs = append(verbs, v)
			}
		}
	}
	return verbs
}

func sarSpec(u v1alpha1.Requester, attrs authorizationv1.ResourceAttributes) authorizationv1.SubjectAccessReviewSpec {
	return authorizationv1.SubjectAccessReviewSpec{User: u.Username, UID: u.UID, Groups: u.Groups, ResourceAttributes: &attrs}
}

func resourceOf(mapper meta.RESTMapper, ref v1alpha1.ObjectRef) (schema.GroupVersionResource, bool, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupVersionResource{}, false, &Malformed{Msg: fmt.Sprintf("target.apiVersion %q: %v", ref.APIVersion, err)}
	}
	m, err := mapper.RESTMapping(gv.WithKind(ref.Kind).GroupKind(), gv.Version)
	if meta.IsNoMatchError(err) {
		return schema.GroupVersionResource{}, false, &Malformed{Msg: fmt.Sprintf("the API server does not serve %s %s", ref.APIVersion, ref.Kind)}
	} else if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("map %s %s: %w", ref.APIVersion, ref.Kind, err)
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s || x == "*" {
			return true
		}
	}
	return false
}

// SARReview asks the API server through its SubjectAccessReview API.
func SARReview(sars authorizationv1client.SubjectAccessReviewInterface) Review {
	return func(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (bool, error) {
		res, err := sars.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("create SubjectAccessReview: %w", err)
		}
		return res.Status.Allowed, nil
	}
}

// Package authz decides whether a requester may have Remedy run an action for
// them. The admission webhook asks it when an execution is created, and the
// workflow's validation asks again before anything changes, because RBAC can
// change while a run waits for approval.
package authz

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
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
// (an unknown action, an unserved kind, a namespaced target without a
// namespace). Fields name each bad field relative to the execution spec
// (target.kind, action); the admission webhook refuses it with a 422 naming
// the fields under the object's own path, and validation fails it InvalidParameters.
type Malformed struct{ Fields field.ErrorList }

func (m *Malformed) Error() string { return m.Fields.ToAggregate().Error() }

// Under is the field errors with their paths under spec, the path of the execution spec in the object.
func (m *Malformed) Under(spec *field.Path) field.ErrorList {
	out := make(field.ErrorList, 0, len(m.Fields))
	for _, f := range m.Fields {
		e := *f
		e.Field = spec.String() + "." + e.Field
		out = append(out, &e)
	}
	return out
}

func malformed(e *field.Error) error { return &Malformed{Fields: field.ErrorList{e}} }

// malformedTogether is every bad field of errs in one Malformed, so an
// unknown action and an unusable target are named in one answer; with none,
// the first other error (discovery down).
func malformedTogether(errs ...error) error {
	var fields field.ErrorList
	var other error
	for _, err := range errs {
		var m *Malformed
		switch {
		case errors.As(err, &m):
			fields = append(fields, m.Fields...)
		case err != nil && other == nil:
			other = err
		}
	}
	if len(fields) > 0 {
		return &Malformed{Fields: fields}
	}
	return other
}

// Authorize returns nil when the requester may run the action, a *Denied
// naming what is missing when not, and other errors when it could not ask.
//
// A namespaced target must be in the object's own namespace. Then either the
// requester holds ExecuteVerb on actions.remedy.dev/<action> in the target's
// namespace (cluster scope for cluster-scoped targets), or could make every
// write the action makes on the target themselves.
func Authorize(ctx context.Context, review Review, mapper meta.RESTMapper, r Request) error {
	a, actionErr := lookup(r.Action)
	gvr, namespaced, targetErr := resourceOf(mapper, r.Target)
	if err := malformedTogether(actionErr, targetErr); err != nil {
		return err
	}
	verbs, err := targetVerbs(a, r.Target, gvr)
	if err != nil {
		return err
	}
	ns := ""
	if namespaced {
		ns = r.Target.Namespace
		if ns == "" {
			return malformed(field.Required(field.NewPath("target", "namespace"), fmt.Sprintf("kind %s is namespaced: name the target's namespace", r.Target.Kind)))
		}
		if ns != r.Namespace {
			return &Denied{Msg: fmt.Sprintf("target %s is in namespace %q, but Remedy acts only in the requesting object's own namespace %q: create the execution in %q",
				r.Target.String(), ns, r.Namespace, ns)}
		}
	}
	ok, err := review(ctx, sarSpec(r.Requester, authorizationv1.ResourceAttributes{
		Namespace: ns, Verb: ExecuteVerb, Group: v1alpha1.GroupVersion.Group, Resource: ActionsResource, Name: r.Action,
	}))
	if err != nil || ok {
		return err
	}
	var missing []string
	for _, verb := range verbs {
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

// targetVerbs are the verbs the action uses on the target, which must be a
// kind the action supports by group, version and kind. None is a refusal,
// never "may perform every one of no verbs": a same-named kind of another API
// group would otherwise pass with no grant at all.
func targetVerbs(a actions.Action, ref v1alpha1.ObjectRef, gvr schema.GroupVersionResource) ([]string, error) {
	want, err := actions.TargetResource(a, ref)
	switch {
	case err != nil && !slices.Contains(a.Kinds(), ref.Kind):
		return nil, malformed(field.Invalid(field.NewPath("target", "kind"), ref.Kind, err.Error()))
	case err != nil:
		return nil, malformed(field.Invalid(field.NewPath("target", "apiVersion"), ref.APIVersion, err.Error()))
	}
	verbs := Verbs(a, gvr)
	if want.GroupResource() != gvr.GroupResource() || len(verbs) == 0 {
		return nil, malformed(field.Invalid(field.NewPath("target", "kind"), ref.Kind,
			fmt.Sprintf("action %s names no verb on %s: Remedy cannot authorize it, so it does not run it", a.Name(), gvr.GroupResource())))
	}
	return verbs, nil
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

// sarSpec asks for u as the API server authenticated them, extra included:
// without it a scoped token would be judged as its full user.
func sarSpec(u v1alpha1.Requester, attrs authorizationv1.ResourceAttributes) authorizationv1.SubjectAccessReviewSpec {
	return authorizationv1.SubjectAccessReviewSpec{User: u.Username, UID: u.UID, Groups: u.Groups, Extra: SARExtra(u.Extra), ResourceAttributes: &attrs}
}

// SARExtra is a user's extra information as a SubjectAccessReview carries it.
func SARExtra(extra map[string][]string) map[string]authorizationv1.ExtraValue {
	if len(extra) == 0 {
		return nil
	}
	out := make(map[string]authorizationv1.ExtraValue, len(extra))
	for k, v := range extra {
		out[k] = authorizationv1.ExtraValue(slices.Clone(v))
	}
	return out
}

// lookup is the catalog's action called name.
func lookup(name string) (actions.Action, error) {
	path := field.NewPath("action")
	if name == "" {
		return nil, malformed(field.Required(path, ""))
	}
	a, ok := actions.Lookup(name)
	if !ok {
		var names []string
		for _, a := range actions.All() {
			names = append(names, a.Name())
		}
		return nil, malformed(field.NotSupported(path, name, names))
	}
	return a, nil
}

func resourceOf(mapper meta.RESTMapper, ref v1alpha1.ObjectRef) (schema.GroupVersionResource, bool, error) {
	target := field.NewPath("target")
	switch {
	case ref == v1alpha1.ObjectRef{}:
		return schema.GroupVersionResource{}, false, malformed(field.Required(target, ""))
	case ref.APIVersion == "":
		return schema.GroupVersionResource{}, false, malformed(field.Required(target.Child("apiVersion"), "such as apps/v1, or v1 for the core group"))
	case ref.Kind == "":
		return schema.GroupVersionResource{}, false, malformed(field.Required(target.Child("kind"), "such as Deployment"))
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupVersionResource{}, false, malformed(field.Invalid(target.Child("apiVersion"), ref.APIVersion, "must be group/version, such as apps/v1, or v1 for the core group"))
	}
	m, err := mapper.RESTMapping(gv.WithKind(ref.Kind).GroupKind(), gv.Version)
	if meta.IsNoMatchError(err) {
		return schema.GroupVersionResource{}, false, unserved(mapper, ref, gv)
	} else if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("map %s %s: %w", ref.APIVersion, ref.Kind, err)
	}
	// Discovery's mapper also maps each kind spelt in lower case; the API server does not.
	if kind, err := mapper.KindFor(m.Resource); err == nil && kind.Kind != ref.Kind {
		return schema.GroupVersionResource{}, false, malformed(misspeltKind(ref, kind))
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// unserved names the field of ref the API server does not serve, and what it
// serves instead: the kind in other versions, or a kind spelt another way.
func unserved(mapper meta.RESTMapper, ref v1alpha1.ObjectRef, gv schema.GroupVersion) error {
	target := field.NewPath("target")
	// The mapper knows each kind by its lower-case singular and plural
	// resource names too, in every version of the group.
	kinds, _ := mapper.KindsFor(schema.GroupVersionResource{Group: gv.Group, Resource: strings.ToLower(ref.Kind)})
	var served []string
	for _, k := range kinds {
		if k.Kind == ref.Kind {
			served = append(served, k.GroupVersion().String())
		}
	}
	switch {
	case len(served) > 0:
		slices.Sort(served)
		return malformed(field.Invalid(target.Child("apiVersion"), ref.APIVersion,
			fmt.Sprintf("the API server does not serve kind %s in %s; it serves it in %s", ref.Kind, ref.APIVersion, strings.Join(slices.Compact(served), ", "))))
	case len(kinds) > 0:
		return malformed(misspeltKind(ref, kinds[0]))
	}
	return malformed(field.Invalid(target.Child("kind"), ref.Kind,
		fmt.Sprintf("the API server serves no kind %s in %s (kubectl api-resources lists what it serves)", ref.Kind, ref.APIVersion)))
}

// misspeltKind names ref's kind, which the API server serves spelt as served.
func misspeltKind(ref v1alpha1.ObjectRef, served schema.GroupVersionKind) *field.Error {
	return field.Invalid(field.NewPath("target", "kind"), ref.Kind, fmt.Sprintf("the API server serves no kind %s in %s (kinds are case-sensitive): did you mean apiVersion %s, kind %s?",
		ref.Kind, ref.APIVersion, served.GroupVersion(), served.Kind))
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

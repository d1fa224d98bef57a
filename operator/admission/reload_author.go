package admission

import (
	"context"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/authz"
)

// reloadKinds are the workload kinds a ConfigReloadPolicy's workloadSelector
// picks from; its author's grant must cover each.
var reloadKinds = []string{"Deployment", "StatefulSet", "DaemonSet"}

// reloadPolicy stamps a ConfigReloadPolicy's spec.author and refuses an
// author who may not restart what it selects, or a selector that cannot be
// parsed. The policy's restarts are made in its author's name, so the author
// is whoever last changed its spec, as the API server authenticated them;
// nothing in the body chooses it.
func (h *Requester) reloadPolicy(ctx context.Context, req admission.Request) admission.Response {
	cur, old, err := decodeWrite[v1alpha1.ConfigReloadPolicy](req, "ConfigReloadPolicy")
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if errs := validateReloadSelectors(&cur.Spec); len(errs) > 0 {
		return refuseInvalid(ctx, req, errs)
	}
	author, authorize := ReloadAuthor(req.UserInfo, old, cur)
	if authorize {
		if err := h.authorizeAuthor(ctx, *author, req.Namespace); err != nil {
			return authorRefused(ctx, req, "ConfigReloadPolicy", "restart what it selects", err)
		}
	}
	if authorUnchanged(cur.Spec.Author, author) {
		return admission.Allowed("")
	}
	return patchAuthor(req, author, nil)
}

// ReloadAuthor is the author a written policy gets, and whether that author
// must be authorized now: on create and on any spec change, the writing user,
// authorized afresh; an update that leaves the spec alone (labels,
// finalizers, the garbage collector's writes) keeps the stored author, even
// none (a policy stored before authors: the write gate refuses its
// restarts until its spec is applied again), whatever the body says.
func ReloadAuthor(u authenticationv1.UserInfo, old, cur *v1alpha1.ConfigReloadPolicy) (*v1alpha1.Requester, bool) {
	b := cur.Spec
	b.Author = nil
	if old == nil {
		return specAuthor(u, (*v1alpha1.ConfigReloadPolicySpec)(nil), &b, nil)
	}
	a := old.Spec
	a.Author = nil
	return specAuthor(u, &a, &b, old.Spec.Author)
}

// specAuthor is the author a written object gets: the writing user, to be
// authorized afresh, on create (old nil) and on any change of the spec
// without its author; otherwise the stored author, unauthorized.
func specAuthor[S any](u authenticationv1.UserInfo, old, cur *S, stored *v1alpha1.Requester) (*v1alpha1.Requester, bool) {
	if old != nil && equality.Semantic.DeepEqual(*old, *cur) {
		return stored, false
	}
	who := fromUser(u)
	return &who, true
}

// authorizeAuthor requires the author to restart every workload the policy
// could select: a selector matches workloads created later too, so the
// grant is asked for the namespace, not for today's matches. "execute" on
// actions.remedy.dev/restart covers all three kinds; without it, the
// author must be able to get and patch each kind in the namespace.
func (h *Requester) authorizeAuthor(ctx context.Context, author v1alpha1.Requester, namespace string) error {
	for _, kind := range reloadKinds {
		err := h.Authorize(ctx, authz.Request{Requester: author, Namespace: namespace, Action: "restart",
			Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: kind, Namespace: namespace}})
		if err != nil {
			return err
		}
	}
	return nil
}

// validateReloadSelectors refuses a selector the operator could not parse
// (an operator "Equals", values with Exists), naming the field.
func validateReloadSelectors(spec *v1alpha1.ConfigReloadPolicySpec) field.ErrorList {
	opts := metav1validation.LabelSelectorValidationOptions{}
	errs := metav1validation.ValidateLabelSelector(&spec.ConfigMapSelector, opts, field.NewPath("spec", "configMapSelector"))
	return append(errs, metav1validation.ValidateLabelSelector(&spec.WorkloadSelector, opts, field.NewPath("spec", "workloadSelector"))...)
}

package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertrule"
	"github.com/remedy-dev/remedy/internal/authz"
)

// remediationRule stamps a RemediationRule's spec.author and refuses a rule
// that could act outside its namespace (422, naming the field) or whose
// author may not run its actions (403, naming the grant). Alerts carry no
// identity: every remediation a rule starts runs in its author's name, so
// the author is whoever last changed the spec, as the API server
// authenticated them.
func (h *Requester) remediationRule(ctx context.Context, req admission.Request) admission.Response {
	var cur v1alpha1.RemediationRule
	if err := decodeObject(req.Object.Raw, &cur); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode RemediationRule: %w", err))
	}
	var old *v1alpha1.RemediationRule
	if req.Operation == admissionv1.Update {
		old = &v1alpha1.RemediationRule{}
		if err := decodeObject(req.OldObject.Raw, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode old RemediationRule: %w", err))
		}
	}
	if errs := alertrule.Check(req.Namespace, &cur.Spec); len(errs) > 0 {
		log.FromContext(ctx).Info("RemediationRule refused", "user", req.UserInfo.Username, "object", req.Namespace+"/"+req.Name, "reason", errs.ToAggregate().Error())
		st := apierrors.NewInvalid(schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}, req.Name, errs).ErrStatus
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &st}}
	}
	var oldSpec *v1alpha1.RemediationRuleSpec
	var oldAuthor *v1alpha1.Requester
	if old != nil {
		oldSpec, oldAuthor = &old.Spec, old.Spec.Author
	}
	curSpec := cur.Spec
	curSpec.Author = nil
	if oldSpec != nil {
		s := *oldSpec
		s.Author = nil
		oldSpec = &s
	}
	author, authorize := specAuthor(req.UserInfo, oldSpec, &curSpec, oldAuthor)
	if authorize {
		if err := authz.RuleSteps(ctx, h.Authorize, *author, req.Namespace, cur.Spec.Template.Steps); err != nil {
			var denied *authz.Denied
			if !errors.As(err, &denied) {
				return admission.Errored(http.StatusInternalServerError, err)
			}
			log.FromContext(ctx).Info("RemediationRule refused", "user", req.UserInfo.Username, "object", req.Namespace+"/"+req.Name, "reason", denied.Msg)
			resp := admission.Denied("the author of a RemediationRule must be allowed to run every action of its template: " + denied.Msg)
			resp.Result.Code, resp.Result.Reason = http.StatusForbidden, metav1.StatusReasonForbidden
			return resp
		}
	}
	sameAuthor := author == nil && cur.Spec.Author == nil || author != nil && cur.Spec.Author != nil && sameRequester(*cur.Spec.Author, *author)
	if sameAuthor && !slices.ContainsFunc(cur.Spec.Template.Steps, func(s v1alpha1.RemediationStep) bool { return s.Execution.Target.Namespace == "" }) {
		return admission.Allowed("")
	}
	var obj map[string]any
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode object: %w", err))
	}
	if author == nil {
		unstructured.RemoveNestedField(obj, "spec", "author")
	} else if err := setRequester(obj, *author, "spec", "author"); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	// A template's target is in the rule's namespace: written out, so the
	// schema's rules for executions hold and kubectl shows it.
	steps, _, _ := unstructured.NestedSlice(obj, "spec", "template", "steps")
	for _, st := range steps {
		if m, ok := st.(map[string]any); ok {
			if ns, _, _ := unstructured.NestedString(m, "execution", "target", "namespace"); ns == "" {
				_ = unstructured.SetNestedField(m, req.Namespace, "execution", "target", "namespace")
			}
		}
	}
	if len(steps) > 0 {
		if err := unstructured.SetNestedSlice(obj, steps, "spec", "template", "steps"); err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("set spec.template.steps: %w", err))
		}
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("encode object: %w", err))
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// alertRequester is the requester of a RemediationRequest that names the
// alert it was started for: only the worker creates those, and only for the
// author stamped on the rule it names, which must still exist.
func (h *Requester) alertRequester(ctx context.Context, u string, ns string, rr *v1alpha1.RemediationRequest) (v1alpha1.Requester, error) {
	if h.Worker == "" || u != h.Worker {
		return v1alpha1.Requester{}, &authz.Denied{Msg: "only Remedy's worker creates RemediationRequests for alerts (spec.alert)"}
	}
	var rule v1alpha1.RemediationRule
	if err := h.Client.Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: rr.Spec.Alert.Rule}, &rule); err != nil {
		return v1alpha1.Requester{}, &authz.Denied{Msg: fmt.Sprintf("RemediationRule %s: %v", rr.Spec.Alert.Rule, err)}
	}
	if rule.Spec.Author == nil || rr.Spec.Requester == nil || !sameRequester(*rule.Spec.Author, *rr.Spec.Requester) {
		return v1alpha1.Requester{}, &authz.Denied{Msg: fmt.Sprintf("the requester of an alert's RemediationRequest must be the author of RemediationRule %s", rule.Name)}
	}
	return *rule.Spec.Author, nil
}

package admission

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
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
	cur, old, err := decodeWrite[v1alpha1.RemediationRule](req, "RemediationRule")
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if errs := alertrule.Check(req.Namespace, &cur.Spec); len(errs) > 0 {
		return refuseInvalid(ctx, req, errs)
	}
	var oldSpec *v1alpha1.RemediationRuleSpec
	var oldAuthor *v1alpha1.Requester
	if old != nil {
		s := old.Spec
		s.Author, oldAuthor = nil, old.Spec.Author
		oldSpec = &s
	}
	curSpec := cur.Spec
	curSpec.Author = nil
	author, authorize := specAuthor(req.UserInfo, oldSpec, &curSpec, oldAuthor)
	if authorize {
		if err := authz.RuleSteps(ctx, h.Authorize, *author, req.Namespace, alertrule.Steps(&cur.Spec)); err != nil {
			return authorRefused(ctx, req, "RemediationRule", "run every action of its template and escalation", err)
		}
	}
	if authorUnchanged(cur.Spec.Author, author) && !slices.ContainsFunc(alertrule.Steps(&cur.Spec), func(s v1alpha1.RemediationStep) bool { return s.Execution.Target.Namespace == "" }) {
		return admission.Allowed("")
	}
	return patchAuthor(req, author, func(obj map[string]any) error { return fillTargetNamespaces(obj, req.Namespace) })
}

// fillTargetNamespaces writes the rule's namespace into each template
// target that leaves it empty (spec.template's and each escalation
// step's): written out, so the schema's rules for executions hold and
// kubectl shows it.
func fillTargetNamespaces(obj map[string]any, namespace string) error {
	if err := fillStepNamespaces(obj, namespace, "spec", "template", "steps"); err != nil {
		return err
	}
	ladder, _, _ := unstructured.NestedSlice(obj, "spec", "escalation")
	for _, e := range ladder {
		if m, ok := e.(map[string]any); ok {
			if err := fillStepNamespaces(m, namespace, "template", "steps"); err != nil {
				return err
			}
		}
	}
	if len(ladder) == 0 {
		return nil
	}
	if err := unstructured.SetNestedSlice(obj, ladder, "spec", "escalation"); err != nil {
		return fmt.Errorf("set spec.escalation: %w", err)
	}
	return nil
}

// fillStepNamespaces fills the empty target namespaces of the steps at path in obj.
func fillStepNamespaces(obj map[string]any, namespace string, path ...string) error {
	steps, _, _ := unstructured.NestedSlice(obj, path...)
	for _, st := range steps {
		if m, ok := st.(map[string]any); ok {
			if ns, _, _ := unstructured.NestedString(m, "execution", "target", "namespace"); ns == "" {
				_ = unstructured.SetNestedField(m, namespace, "execution", "target", "namespace")
			}
		}
	}
	if len(steps) == 0 {
		return nil
	}
	if err := unstructured.SetNestedSlice(obj, steps, path...); err != nil {
		return fmt.Errorf("set %s: %w", strings.Join(path, "."), err)
	}
	return nil
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

package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/authz"
)

// RequesterPath serves CREATE of kubernetesexecutions and remediationrequests,
// UPDATE of kubernetesexecutions, and CREATE and UPDATE of
// configreloadpolicies (deploy/webhook/requester.yaml).
const RequesterPath = "/mutate-remedy-dev-v1alpha1-requester"

// Requester stamps the authenticated user into spec.requester and refuses
// what that user may not have Remedy do, and what cannot run at all.
//
// It reads only what the API server vouches for: the user from userInfo,
// the spec and the rollback reason from the object, and the status and every
// record of who asked for what from oldObject. A mutating webhook sees a
// caller's status and annotations before the API server drops or checks them.
type Requester struct {
	// Authorize is authz.Authorize bound to the API server.
	Authorize func(ctx context.Context, r authz.Request) error
	// Client reads the RemediationRequest a step names.
	Client ctrlclient.Reader
	// Namespaces reads a target's namespace, for the protected-namespace rule.
	Namespaces ctrlclient.Reader
	// CheckCondition compiles a condition's Rego in the sandbox validation
	// uses (policy.Engine.CheckCondition).
	CheckCondition func(ctx context.Context, name, module string) error
	// CompileBudget bounds the time one request's conditions compile, all
	// together; DefaultCompileBudget when zero.
	CompileBudget time.Duration
	// Worker is the worker's username: the only one that may pass a
	// RemediationRequest's requester on to its steps.
	Worker string
}

// Handle checks and authorizes, and answers with a patch or a refusal:
// 422 naming the fields for input that cannot run, 403 for what the user may
// not do. Nothing is admitted unchecked.
func (h *Requester) Handle(ctx context.Context, req admission.Request) admission.Response {
	var err error
	var stamp func(obj map[string]any) error
	if req.Kind.Group != v1alpha1.GroupVersion.Group {
		// Kinds are matched by group too: a same-named kind of another
		// group is not Remedy's, and nothing routes one here.
		return admission.Allowed("")
	}
	switch {
	case req.Kind.Kind == "KubernetesExecution" && req.Operation == admissionv1.Create:
		stamp, err = h.createExecution(ctx, req)
	case req.Kind.Kind == "RemediationRequest" && req.Operation == admissionv1.Create:
		stamp, err = h.createRemediation(ctx, req)
	case req.Kind.Kind == "KubernetesExecution" && req.Operation == admissionv1.Update:
		stamp, err = h.updateExecution(ctx, req)
	case req.Kind.Kind == "ConfigReloadPolicy" && (req.Operation == admissionv1.Create || req.Operation == admissionv1.Update):
		return h.reloadPolicy(ctx, req)
	case req.Kind.Kind == "RemediationRule" && (req.Operation == admissionv1.Create || req.Operation == admissionv1.Update):
		return h.remediationRule(ctx, req)
	default:
		return admission.Allowed("")
	}
	var denied *authz.Denied
	var inv *invalidError
	var malformed *authz.Malformed
	if errors.As(err, &malformed) {
		inv = &invalidError{errs: malformed.Under(field.NewPath("spec"))}
	}
	if inv != nil || errors.As(err, &inv) {
		return refuseInvalid(ctx, req, inv.errs)
	}
	if errors.As(err, &denied) {
		log.FromContext(ctx).Info("request refused", "user", req.UserInfo.Username, "kind", req.Kind.Kind,
			"object", req.Namespace+"/"+req.Name, "reason", denied.Msg)
		resp := admission.Denied(denied.Msg)
		resp.Result.Code, resp.Result.Reason = http.StatusForbidden, metav1.StatusReasonForbidden
		return resp
	} else if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if stamp == nil {
		return admission.Allowed("")
	}
	var obj map[string]any
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode object: %w", err))
	}
	if err := stamp(obj); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("encode object: %w", err))
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// invalidError refuses input that cannot run with a 422 whose causes name
// the fields, as the API server's own validation does (kubectl prints them).
type invalidError struct{ errs field.ErrorList }

func (e *invalidError) Error() string { return e.errs.ToAggregate().Error() }

func invalid(errs ...*field.Error) error { return &invalidError{errs: errs} }

func (h *Requester) createExecution(ctx context.Context, req admission.Request) (func(map[string]any) error, error) {
	var k v1alpha1.KubernetesExecution
	if err := decodeObject(req.Object.Raw, &k); err != nil {
		return nil, err
	}
	if _, ok := k.Annotations[v1alpha1.RollbackAnnotation]; ok {
		return nil, invalid(field.Forbidden(rollbackAnnotationPath(),
			"a rollback is asked for once the run is RollbackReady, not when the execution is created"))
	}
	who := StampedRequester(req.UserInfo, k.Spec.Requester, k.Spec.RemediationRequestRef != nil, h.Worker)
	if !sameRequester(who, fromUser(req.UserInfo)) {
		// The worker passes a request's requester on: it must be that request's.
		var rr v1alpha1.RemediationRequest
		if err := h.Client.Get(ctx, ctrlclient.ObjectKey{Namespace: req.Namespace, Name: k.Spec.RemediationRequestRef.Name}, &rr); err != nil {
			return nil, &authz.Denied{Msg: fmt.Sprintf("step of RemediationRequest %s: %v", k.Spec.RemediationRequestRef.Name, err)}
		}
		if rr.Spec.Requester == nil || !sameRequester(*rr.Spec.Requester, who) {
			return nil, &authz.Denied{Msg: fmt.Sprintf("step requester %q is not the requester of RemediationRequest %s", who.Username, rr.Name)}
		}
	}
	errs, err := h.checkSpec(ctx, req.Namespace, k.Spec, field.NewPath("spec"), who)
	if len(errs) > 0 {
		return nil, &invalidError{errs: errs}
	} else if err != nil {
		return nil, err
	}
	return func(obj map[string]any) error {
		// Only this webhook writes who asked for a rollback, and only on update.
		unstructured.RemoveNestedField(obj, "metadata", "annotations", v1alpha1.RollbackRequesterAnnotation)
		return setRequester(obj, who, "spec", "requester")
	}, nil
}

// createRemediation checks and authorizes every step, and refuses naming
// each step that cannot run or that the user may not have run.
func (h *Requester) createRemediation(ctx context.Context, req admission.Request) (func(map[string]any) error, error) {
	var rr v1alpha1.RemediationRequest
	if err := decodeObject(req.Object.Raw, &rr); err != nil {
		return nil, err
	}
	who := fromUser(req.UserInfo)
	if rr.Spec.Alert != nil {
		var err error
		if who, err = h.alertRequester(ctx, req.UserInfo.Username, req.Namespace, &rr); err != nil {
			return nil, err
		}
	}
	var errs field.ErrorList
	var denials []string
	for i, s := range rr.Spec.Steps {
		path := field.NewPath("spec", "steps").Index(i).Child("execution")
		stepErrs, err := h.checkSpec(ctx, req.Namespace, s.Execution, path, who)
		errs = append(errs, stepErrs...)
		var denied *authz.Denied
		if errors.As(err, &denied) {
			denials = append(denials, "step "+s.Name+": "+denied.Msg)
			errs = append(errs, field.Forbidden(path, fmt.Sprintf("step %s: %s", s.Name, denied.Msg)))
		} else if err != nil {
			return nil, err
		}
	}
	switch {
	case len(errs) > len(denials):
		// Some step cannot run at all: name every problem of every step.
		return nil, &invalidError{errs: errs}
	case len(denials) > 0:
		return nil, &authz.Denied{Msg: strings.Join(denials, "; ")}
	}
	return func(obj map[string]any) error {
		// Steps run for the request's requester, whatever a step's body says.
		steps, _, _ := unstructured.NestedSlice(obj, "spec", "steps")
		for _, s := range steps {
			if exec, ok := s.(map[string]any)["execution"].(map[string]any); ok {
				delete(exec, "requester")
			}
		}
		if err := unstructured.SetNestedSlice(obj, steps, "spec", "steps"); err != nil {
			return fmt.Errorf("set spec.steps: %w", err)
		}
		return setRequester(obj, who, "spec", "requester")
	}, nil
}

// StampedRequester is the requester a new execution runs for: the
// authenticated user, except that the worker passes a RemediationRequest's
// requester on to the request's steps.
func StampedRequester(u authenticationv1.UserInfo, body *v1alpha1.Requester, step bool, worker string) v1alpha1.Requester {
	if step && body != nil && body.Username != "" && worker != "" && u.Username == worker {
		return *body
	}
	return fromUser(u)
}

// fromUser is the user as the API server authenticated them, extra
// included: every SubjectAccessReview for them carries it.
func fromUser(u authenticationv1.UserInfo) v1alpha1.Requester {
	r := v1alpha1.Requester{Username: u.Username, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		r.Extra = make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			r.Extra[k] = slices.Clone([]string(v))
		}
	}
	return r
}

func sameRequester(a, b v1alpha1.Requester) bool {
	return a.Username == b.Username && a.UID == b.UID && slices.Equal(a.Groups, b.Groups) &&
		maps.EqualFunc(a.Extra, b.Extra, slices.Equal[[]string])
}

func setRequester(obj map[string]any, r v1alpha1.Requester, path ...string) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&r)
	if err != nil {
		return fmt.Errorf("encode requester: %w", err)
	}
	if err := unstructured.SetNestedMap(obj, m, path...); err != nil {
		return fmt.Errorf("set spec.requester: %w", err)
	}
	return nil
}

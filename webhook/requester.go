package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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
// what that user may not have Remedy do.
type Requester struct {
	// Authorize is authz.Authorize bound to the API server.
	Authorize func(ctx context.Context, r authz.Request) error
	// Client reads the RemediationRequest a step names.
	Client  ctrlclient.Reader
	Decoder admission.Decoder
	// Worker is the worker's username: the only one that may pass a
	// RemediationRequest's requester on to its steps.
	Worker string
}

// NewRequester returns the handler for scheme's types.
func NewRequester(authorize func(context.Context, authz.Request) error, c ctrlclient.Reader, scheme *runtime.Scheme, worker string) *Requester {
	return &Requester{Authorize: authorize, Client: c, Decoder: admission.NewDecoder(scheme), Worker: worker}
}

// Handle decodes, asks the authorizer, and answers with a patch or a refusal.
func (h *Requester) Handle(ctx context.Context, req admission.Request) admission.Response {
	var err error
	var stamp func(obj map[string]any) error
	switch {
	case req.Kind.Kind == "KubernetesExecution" && req.Operation == admissionv1.Create:
		stamp, err = h.createExecution(ctx, req)
	case req.Kind.Kind == "RemediationRequest" && req.Operation == admissionv1.Create:
		stamp, err = h.createRemediation(ctx, req)
	case req.Kind.Kind == "KubernetesExecution" && req.Operation == admissionv1.Update:
		stamp, err = h.updateExecution(ctx, req)
	case req.Kind.Kind == "ConfigReloadPolicy" && (req.Operation == admissionv1.Create || req.Operation == admissionv1.Update):
		return h.reloadPolicy(ctx, req)
	default:
		return admission.Allowed("")
	}
	var denied *authz.Denied
	var malformed *authz.Malformed
	if errors.As(err, &malformed) {
		// Bad input: the CRD schema and CEL, which run after this webhook,
		// refuse it with their own message. Nothing is stamped, so should
		// they let it through, validation refuses the run for want of a requester.
		return admission.Allowed("")
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

func (h *Requester) createExecution(ctx context.Context, req admission.Request) (func(map[string]any) error, error) {
	var k v1alpha1.KubernetesExecution
	if err := h.Decoder.DecodeRaw(req.Object, &k); err != nil {
		return nil, &authz.Denied{Msg: fmt.Sprintf("decode KubernetesExecution: %v", err)}
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
	if err := h.Authorize(ctx, authz.Request{Requester: who, Namespace: req.Namespace, Action: k.Spec.Action, Target: k.Spec.Target}); err != nil {
		return nil, err
	}
	return func(obj map[string]any) error { return setRequester(obj, who, "spec", "requester") }, nil
}

func (h *Requester) createRemediation(ctx context.Context, req admission.Request) (func(map[string]any) error, error) {
	var rr v1alpha1.RemediationRequest
	if err := h.Decoder.DecodeRaw(req.Object, &rr); err != nil {
		return nil, &authz.Denied{Msg: fmt.Sprintf("decode RemediationRequest: %v", err)}
	}
	who := fromUser(req.UserInfo)
	for _, s := range rr.Spec.Steps {
		err := h.Authorize(ctx, authz.Request{Requester: who, Namespace: req.Namespace, Action: s.Execution.Action, Target: s.Execution.Target})
		var denied *authz.Denied
		if errors.As(err, &denied) {
			return nil, &authz.Denied{Msg: "step " + s.Name + ": " + denied.Msg}
		} else if err != nil {
			return nil, err
		}
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

// updateExecution authorizes a rollback request made by annotation for the
// inverse action, and records who made it; nobody else may write that record.
func (h *Requester) updateExecution(ctx context.Context, req admission.Request) (func(map[string]any) error, error) {
	var old, cur v1alpha1.KubernetesExecution
	if err := h.Decoder.DecodeRaw(req.OldObject, &old); err != nil {
		return nil, &authz.Denied{Msg: fmt.Sprintf("decode old KubernetesExecution: %v", err)}
	}
	if err := h.Decoder.DecodeRaw(req.Object, &cur); err != nil {
		return nil, &authz.Denied{Msg: fmt.Sprintf("decode KubernetesExecution: %v", err)}
	}
	reason, asked := cur.Annotations[v1alpha1.RollbackAnnotation]
	oldReason, wasAsked := old.Annotations[v1alpha1.RollbackAnnotation]
	record := old.Annotations[v1alpha1.RollbackRequesterAnnotation]
	if asked && (!wasAsked || reason != oldReason) {
		action := cur.Spec.Action
		if rb := cur.Status.RollbackInformation; rb != nil && rb.RollbackAction != "" {
			action = rb.RollbackAction
		}
		err := h.Authorize(ctx, authz.Request{Requester: fromUser(req.UserInfo), Namespace: req.Namespace, Action: action, Target: cur.Spec.Target})
		var denied *authz.Denied
		if errors.As(err, &denied) {
			return nil, &authz.Denied{Msg: "rollback: " + denied.Msg}
		} else if err != nil {
			return nil, err
		}
		record = req.UserInfo.Username
	}
	if cur.Annotations[v1alpha1.RollbackRequesterAnnotation] == record {
		return nil, nil
	}
	return func(obj map[string]any) error {
		ann, _, _ := unstructured.NestedStringMap(obj, "metadata", "annotations")
		if ann == nil {
			ann = map[string]string{}
		}
		if record == "" {
			delete(ann, v1alpha1.RollbackRequesterAnnotation)
		} else {
			ann[v1alpha1.RollbackRequesterAnnotation] = record
		}
		return unstructured.SetNestedStringMap(obj, ann, "metadata", "annotations")
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

func fromUser(u authenticationv1.UserInfo) v1alpha1.Requester {
	return v1alpha1.Requester{Username: u.Username, UID: u.UID, Groups: u.Groups}
}

func sameRequester(a, b v1alpha1.Requester) bool {
	return a.Username == b.Username && a.UID == b.UID && slices.Equal(a.Groups, b.Groups)
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

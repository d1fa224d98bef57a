package gate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/authz"
	"github.com/remedy-dev/remedy/internal/policy"
)

// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets;replicasets,verbs=get
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=get
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups="",resources=nodes;configmaps;services,verbs=get

// conditionInterval is how often an unmet condition is evaluated again.
const conditionInterval = time.Second

// ConditionRequest is one pre- or postcondition on one target.
type ConditionRequest struct {
	Condition v1alpha1.Condition `json:"condition"`
	Target    v1alpha1.ObjectRef `json:"target"`
	// Requester is the run's spec.requester: the condition reads only what
	// they may read, since its message goes back to them in .status.
	Requester *v1alpha1.Requester `json:"requester,omitempty"`
}

// EvaluateCondition evaluates the condition's Rego `pass` against the live
// target and its pods until it holds or the condition's timeout ends,
// heartbeating in between. Not holding is a result, not an error. Reading
// what the requester may not read fails Forbidden, before any evaluation.
func (v *Validation) EvaluateCondition(ctx context.Context, in ConditionRequest) (v1alpha1.ConditionResult, error) {
	timeout := in.Condition.Timeout.Or(30 * time.Second)
	res := v1alpha1.ConditionResult{Name: in.Condition.Name, Required: in.Condition.Required}
	// Only the subject's own run evaluates its conditions (ReadBinder).
	if err := BindRead(ctx, v.Runs, ReadFor{What: "evaluate a condition on", Target: in.Target, Requester: in.Requester}); err != nil {
		return res, err
	}
	deadline := time.Now().Add(timeout)
	reads, err := v.conditionReads(ctx, in)
	if err != nil {
		return res, err
	}
	for {
		res.Attempts++
		input, err := v.conditionInput(ctx, in.Target, reads)
		var perm *temporal.ApplicationError
		switch {
		case errors.As(err, &perm) && perm.NonRetryable():
			return res, err
		case err != nil:
			res.Message = err.Error()
		default:
			out, err := v.Policy.EvalCondition(ctx, in.Condition.Name, in.Condition.Rego, input)
			switch {
			case policy.IsInvalid(err):
				return res, fail.Permanent(v1alpha1.ReasonInvalidParameters, err)
			case policy.IsTimeout(err):
				// The sandbox stopped it; the same Rego would only burn the
				// same time again, so this attempt is the last.
				res.Passed, res.Message = false, err.Error()
				res.EvaluatedAt = &metav1.Time{Time: time.Now()}
				return res, nil
			case err != nil:
				return res, err
			}
			res.Passed, res.Message = out.Pass, out.Message
		}
		res.EvaluatedAt = &metav1.Time{Time: time.Now()}
		activity.RecordHeartbeat(ctx, res.Attempts)
		if res.Passed || !time.Now().Add(conditionInterval).Before(deadline) {
			return res, nil
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(conditionInterval):
		}
	}
}

// conditionReads is what one condition may read for its requester. It asks
// once per EvaluateCondition call, not per attempt, so a condition polling
// for minutes costs at most two SubjectAccessReviews.
type conditionReads struct {
	name      string
	requester v1alpha1.Requester
	gvr       schema.GroupVersionResource
	// podsAllowed: asked only once a selector makes the pods part of the input.
	podsAllowed bool
}

// conditionReads checks that the requester may get the target, before anything is read.
func (v *Validation) conditionReads(ctx context.Context, in ConditionRequest) (*conditionReads, error) {
	if in.Requester == nil || in.Requester.Username == "" {
		return nil, fail.Permanent(v1alpha1.ReasonForbidden, fmt.Errorf(
			"condition %s: the execution has no spec.requester, and a condition reads only what its requester may read", in.Condition.Name))
	}
	gvr, err := v.resourceOf(in.Target)
	if err != nil {
		return nil, err
	}
	r := &conditionReads{name: in.Condition.Name, requester: *in.Requester, gvr: gvr}
	err = r.allow(ctx, v, authorizationv1.ResourceAttributes{
		Namespace: in.Target.Namespace, Verb: "get", Group: gvr.Group, Resource: gvr.Resource, Name: in.Target.Name,
	}, "the target")
	return r, err
}

// allow asks whether the requester may read what, by SubjectAccessReview.
func (r *conditionReads) allow(ctx context.Context, v *Validation, attrs authorizationv1.ResourceAttributes, what string) error {
	err := authz.MayRead(ctx, authz.SARReview(v.Kube.AuthorizationV1().SubjectAccessReviews()), r.requester, attrs)
	var denied *authz.Denied
	if errors.As(err, &denied) {
		return fail.Permanent(v1alpha1.ReasonForbidden, fmt.Errorf(
			"condition %s reads %s for %s, and its message goes into .status: %w, or remove the condition", r.name, what, r.requester.Username, err))
	}
	if err != nil {
		return fmt.Errorf("authorize condition %s for %s: %w", r.name, r.requester.Username, err)
	}
	return nil
}

// conditionInput reads the target and, for workloads, the pods its selector
// matches, each only once reads says the requester may.
func (v *Validation) conditionInput(ctx context.Context, ref v1alpha1.ObjectRef, reads *conditionReads) (policy.ConditionInput, error) {
	obj, err := v.Dynamic.Resource(reads.gvr).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return policy.ConditionInput{}, err
	}
	in := policy.ConditionInput{Target: obj.Object, Related: []map[string]any{}}
	sel, found, _ := unstructured.NestedStringMap(obj.Object, "spec", "selector", "matchLabels")
	if !found || len(sel) == 0 || ref.Namespace == "" {
		return in, nil
	}
	if !reads.podsAllowed {
		err := reads.allow(ctx, v, authorizationv1.ResourceAttributes{Namespace: ref.Namespace, Verb: "list", Resource: "pods"},
			"the pods the target's selector matches")
		if err != nil {
			return policy.ConditionInput{}, err
		}
		reads.podsAllowed = true
	}
	pods, err := v.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace(ref.Namespace).
		List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	if err != nil {
		return policy.ConditionInput{}, err
	}
	for _, p := range pods.Items {
		in.Related = append(in.Related, p.Object)
	}
	return in, nil
}

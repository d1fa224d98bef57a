package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/remedy-dev/remedy/activities/policy"
	"github.com/remedy-dev/remedy/api/v1alpha1"
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
}

// EvaluateCondition evaluates the condition's Rego `pass` against the live
// target and its pods until it holds or the condition's timeout ends,
// heartbeating in between. Not holding is a result, not an error.
func (v *Validation) EvaluateCondition(ctx context.Context, in ConditionRequest) (v1alpha1.ConditionResult, error) {
	timeout := in.Condition.Timeout.Or(30 * time.Second)
	res := v1alpha1.ConditionResult{Name: in.Condition.Name, Required: in.Condition.Required}
	deadline := time.Now().Add(timeout)
	for {
		res.Attempts++
		input, err := v.conditionInput(ctx, in.Target)
		if err != nil {
			res.Message = err.Error()
		} else {
			out, err := v.Policy.EvalCondition(ctx, in.Condition.Name, in.Condition.Rego, input)
			switch {
			case policy.IsInvalid(err):
				return res, permanent(ReasonInvalidParameters, err)
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

// conditionInput reads the target and, for workloads, the pods its selector matches.
func (v *Validation) conditionInput(ctx context.Context, ref v1alpha1.ObjectRef) (policy.ConditionInput, error) {
	gvr, err := v.resourceOf(ref)
	if err != nil {
		return policy.ConditionInput{}, err
	}
	obj, err := v.Dynamic.Resource(gvr).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return policy.ConditionInput{}, err
	}
	in := policy.ConditionInput{Target: obj.Object, Related: []map[string]any{}}
	sel, found, _ := unstructured.NestedStringMap(obj.Object, "spec", "selector", "matchLabels")
	if !found || len(sel) == 0 || ref.Namespace == "" {
		return in, nil
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

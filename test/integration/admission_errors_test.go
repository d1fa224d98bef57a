package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// The newcomer's policy: a selector operator "Equals" and two bad durations
// took three attempts. One create now gets one 422 naming every field.
func TestAdmissionReportsEveryPolicyErrorAtOnce(t *testing.T) {
	ns := harness.Namespace(t)
	p := authoredPolicy(ns, "three-mistakes", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: "Equals", Values: []string{"web"}}}})
	bad := v1alpha1.Duration("5 s")
	p.Spec.Debounce = &bad
	p.Spec.MaxWait = v1alpha1.DurationOf(2 * time.Hour)
	err := harness.Kube().Create(context.Background(), p)
	t.Logf("refusal: %v", err)
	requireInvalid(t, err,
		`spec.workloadSelector.matchExpressions[0].operator: Invalid value: "Equals"`,
		`spec.debounce: Invalid value: "5 s"`,
		`spec.maxWait: Invalid value: "2h0m0s": must be at most 1h`)
	assert.Len(t, causes(t, err), 3, "one cause per mistake")
	requireAbsent(t, p)
}

// The newcomer's rule: a template that does not parse and a cooldown that
// is not a duration took two attempts. One create now gets one 422.
func TestAdmissionReportsEveryRuleErrorAtOnce(t *testing.T) {
	ns := harness.Namespace(t)
	bad := v1alpha1.Duration("ten minutes")
	r := &v1alpha1.RemediationRule{ObjectMeta: metav1.ObjectMeta{Name: "two-mistakes", Namespace: ns}, Spec: v1alpha1.RemediationRuleSpec{
		Matchers: []string{`alertname="Down"`},
		Cooldown: &bad,
		Template: v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{{Name: "restart", Execution: v1alpha1.KubernetesExecutionSpec{
			Action: "restart", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "{{ .Labels.deployment "}}}}},
	}}
	err := harness.Kube().Create(context.Background(), r)
	t.Logf("refusal: %v", err)
	requireInvalid(t, err,
		`spec.template.steps[0].execution.target.name: Invalid value: "{{ .Labels.deployment ": template:`,
		`spec.cooldown: Invalid value: "ten minutes"`)
	assert.NotContains(t, err.Error(), "target.namespace is required", "the webhook fills a template's target namespace before the schema checks it")
	assert.Len(t, causes(t, err), 2, "one cause per mistake")
	requireAbsent(t, r)
}

// causes are the refusal's causes, one per field problem, as kubectl prints them.
func causes(t *testing.T, err error) []metav1.StatusCause {
	t.Helper()
	var status apierrors.APIStatus
	require.True(t, errors.As(err, &status))
	require.NotNil(t, status.Status().Details)
	return status.Status().Details.Causes
}

// An execution with a target the API server does not serve (the webhook's
// check) and two bad durations (the schema's) is refused once, naming all
// three: the schema's first, as the API server lists them.
func TestAdmissionReportsEveryExecutionErrorAtOnce(t *testing.T) {
	ns := namespaceWith(t, "web", 1)
	spec := scaleSpec(ns, "web", 3)
	spec.Target.APIVersion = "apps/v2"
	timeout, window := v1alpha1.Duration("5 s"), v1alpha1.Duration("-1m")
	spec.Timeout, spec.RollbackWindow = &timeout, &window
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "three-mistakes", Namespace: ns}, Spec: spec}
	err := harness.Kube().Create(context.Background(), k)
	t.Logf("refusal: %v", err)
	requireInvalid(t, err,
		`spec.timeout: Invalid value: "5 s": must be a duration`,
		`spec.rollbackWindow: Invalid value: "-1m": must be a duration`,
		`spec.target.apiVersion: Invalid value: "apps/v2": the API server does not serve kind Deployment in apps/v2; it serves it in apps/v1`)
	assert.Len(t, causes(t, err), 3, "one cause per mistake")
	assert.Less(t, strings.Index(err.Error(), "spec.timeout"), strings.Index(err.Error(), "spec.target.apiVersion"), "the schema's errors come first")
	requireAbsent(t, k)
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
}

// A request whose first step has an unserved target (the webhook's check)
// and whose second step has a bad timeout and rollback window (the
// schema's) is refused once, naming every field under its step. An action
// outside the schema's enum is named with the target; as in the API server,
// the durations' CEL rules then wait for the next attempt.
func TestAdmissionReportsEveryRequestErrorAtOnce(t *testing.T) {
	ns := namespaceWith(t, "web", 1)
	first := scaleSpec(ns, "web", 2)
	first.Target.APIVersion = "apps/v2"
	second := scaleSpec(ns, "web", 3)
	timeout, window := v1alpha1.Duration("1 m"), v1alpha1.Duration("-1m")
	second.Timeout, second.RollbackWindow = &timeout, &window
	rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Name: "three-mistakes", Namespace: ns}, Spec: v1alpha1.RemediationRequestSpec{
		Steps: []v1alpha1.RemediationStep{{Name: "first", Execution: first}, {Name: "second", Execution: second}}}}
	err := harness.Kube().Create(context.Background(), rr)
	t.Logf("refusal: %v", err)
	requireInvalid(t, err,
		`spec.steps[1].execution.rollbackWindow: Invalid value: "-1m": must be a duration`,
		`spec.steps[1].execution.timeout: Invalid value: "1 m": must be a duration`,
		`spec.steps[0].execution.target.apiVersion: Invalid value: "apps/v2"`)
	assert.Len(t, causes(t, err), 3, "one cause per mistake")
	requireAbsent(t, rr)

	rr.Spec.Steps[0].Execution.Action = "reboot"
	err = harness.Kube().Create(context.Background(), rr)
	requireInvalid(t, err,
		`spec.steps[0].execution.action: Unsupported value: "reboot"`,
		`spec.steps[0].execution.target.apiVersion: Invalid value: "apps/v2"`,
		"some validation rules were not checked because the object was invalid")
	assert.NotContains(t, err.Error(), "spec.steps[1].execution.timeout", "the API server runs no CEL rule on an object with an enum error")
	requireAbsent(t, rr)
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
}

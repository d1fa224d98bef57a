package gate

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/policy"
)

// echo publishes the condition's whole input in its message, as an attacker's condition would.
const echo = "package pre.echo\n\npass := false\n\nmessage := json.marshal(input)\n"

// conditionFixture serves a Deployment whose env holds a secret and a Pod it
// selects that holds another, and answers SubjectAccessReviews from grants
// ("verb resource" per user), counting them.
func conditionFixture(t *testing.T, grants map[string][]string) (*testsuite.TestActivityEnvironment, *int) {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	labels := map[string]string{"app": "web"}
	web := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Env: []corev1.EnvVar{{Name: "DB_PASSWORD", Value: "hunter2"}}}}}}},
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Env: []corev1.EnvVar{{Name: "API_TOKEN", Value: "tok-123"}}}}}}
	settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "settings"}, Data: map[string]string{"DB_PASSWORD": "hunter2"}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(s, map[schema.GroupVersionResource]string{
		{Version: "v1", Resource: "pods"}: "PodList",
	}, web, pod, settings)
	kube := kubefake.NewClientset()
	var mu sync.Mutex
	reviews := 0
	kube.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		mu.Lock()
		reviews++
		mu.Unlock()
		attrs := sar.Spec.ResourceAttributes
		for _, g := range grants[sar.Spec.User] {
			if g == attrs.Verb+" "+attrs.Resource {
				sar.Status.Allowed = true
			}
		}
		return true, sar, nil
	})
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), meta.RESTScopeNamespace)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&Validation{Kube: kube, Dynamic: dyn, Mapper: mapper, Policy: policy.NewEngine(), Runs: allowReads{}})
	return env, &reviews
}

func TestConditionReadsOnlyWhatTheRequesterMayRead(t *testing.T) {
	deployment := v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
	configMap := v1alpha1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "settings"}
	grants := map[string][]string{
		"reader":   {"get deployments", "list pods", "get configmaps"},
		"no-pods":  {"get deployments"},
		"executor": {},
	}
	tests := []struct {
		name      string
		requester *v1alpha1.Requester
		target    v1alpha1.ObjectRef
		want      string // the Forbidden message, or "" for a result
		reviews   int
	}{
		{"may read target and pods", &v1alpha1.Requester{Username: "reader"}, deployment, "", 2},
		{"may read a target without a selector", &v1alpha1.Requester{Username: "reader"}, configMap, "", 1},
		{"only execute", &v1alpha1.Requester{Username: "executor"}, deployment,
			`condition echo reads the target for executor, and its message goes into .status: user "executor" cannot get resource "deployments" in API group "apps" in the namespace shop (resourceName "web"): grant the verb "get" on deployments.apps/web, or remove the condition`, 1},
		{"only execute on a ConfigMap", &v1alpha1.Requester{Username: "executor"}, configMap,
			`user "executor" cannot get resource "configmaps" in API group "" in the namespace shop (resourceName "settings"): grant the verb "get" on configmaps/settings`, 1},
		{"may get but not list pods", &v1alpha1.Requester{Username: "no-pods"}, deployment,
			`condition echo reads the pods the target's selector matches for no-pods, and its message goes into .status: user "no-pods" cannot list resource "pods" in API group "" in the namespace shop: grant the verb "list" on pods`, 2},
		{"no requester", nil, deployment, "the execution has no spec.requester", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, reviews := conditionFixture(t, grants)
			// Long enough for several attempts: the reviews are asked once per call.
			cond := v1alpha1.Condition{Name: "echo", Rego: echo, Required: true, Timeout: v1alpha1.DurationOf(2500 * time.Millisecond)}
			val, err := env.ExecuteActivity((&Validation{}).EvaluateCondition, ConditionRequest{Condition: cond, Target: tt.target, Requester: tt.requester})
			assert.Equal(t, tt.reviews, *reviews, "SubjectAccessReviews")
			if tt.want == "" {
				require.NoError(t, err)
				var res v1alpha1.ConditionResult
				require.NoError(t, val.Get(&res))
				assert.GreaterOrEqual(t, res.Attempts, int32(2))
				assert.Contains(t, res.Message, "hunter2", "a requester who may read the target sees it")
				return
			}
			app := requirePermanent(t, err, v1alpha1.ReasonForbidden)
			assert.Contains(t, app.Error(), tt.want)
			assert.NotContains(t, app.Error(), "hunter2")
			assert.NotContains(t, app.Error(), "tok-123")
		})
	}
}

// requirePermanent asserts err is a non-retryable failure of reason.
func requirePermanent(t *testing.T, err error, reason string) *temporal.ApplicationError {
	t.Helper()
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	assert.Equal(t, reason, app.Type())
	assert.True(t, app.NonRetryable(), "a %s failure is never retried", reason)
	return app
}

// allowReads binds every read: these tests are of the condition, not of its caller (subject_reads_test.go is).
type allowReads struct{}

func (allowReads) bindRead(context.Context, ReadFor) error { return nil }

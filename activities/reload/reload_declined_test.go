package reload

import (
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	ctrlfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/activities/internal/activitytest"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/internal/policy"
	"github.com/remedy-dev/remedy/internal/reloadrule"
)

func reloadFixture(t *testing.T, meta, template map[string]string) (*Reload, *kubefake.Clientset, *dynamicfake.FakeDynamicClient, reloadRun) {
	t.Helper()
	return reloadFixtureIn(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, meta, template)
}

// reloadFixtureIn places the workload shop/web in a namespace with ns's
// labels, selected by policy "reload" (authored by alice, whose grant the
// fake authorizer allows) with ConfigMap app, whose data hashes to appHash.
func reloadFixtureIn(t *testing.T, ns *corev1.Namespace, meta, template map[string]string) (*Reload, *kubefake.Clientset, *dynamicfake.FakeDynamicClient, reloadRun) {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	labels := map[string]string{"reload": "true", "env": "prod"}
	web := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "web-uid", Labels: labels, Annotations: meta},
		Spec:       appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: template}}},
	}
	sel := metav1.LabelSelector{MatchLabels: map[string]string{"reload": "true"}}
	crp := &v1alpha1.ConfigReloadPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "reload"},
		Spec: v1alpha1.ConfigReloadPolicySpec{ConfigMapSelector: sel, WorkloadSelector: sel, Author: &v1alpha1.Requester{Username: "alice"}}}
	rar := func(name string, d v1alpha1.Decision) *v1alpha1.RemediationApprovalRequest {
		return &v1alpha1.RemediationApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec: v1alpha1.RemediationApprovalRequestSpec{
				SubjectRef: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
				WorkflowID: v1alpha1.ReloadWorkflowID("shop", "Deployment", "web"),
				ApprovalContext: v1alpha1.ApprovalContext{Action: "restart",
					Reason: "rolling restart of Deployment shop/web for new ConfigMap data: app=a1, app=" + appHash},
			},
			Status: v1alpha1.RemediationApprovalRequestStatus{Decision: d}}
	}
	subjects := ctrlfake.NewClientBuilder().WithScheme(s).WithObjects(web, crp, appConfigMap(),
		rar("reload-deployment-web-1", v1alpha1.DecisionRejected), rar("reload-deployment-web-2", v1alpha1.DecisionRejected)).Build()
	dyn := dynamicfake.NewSimpleDynamicClient(s, web)
	kube := kubefake.NewClientset(ns, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "remedy-system", Name: "safety",
		Labels: map[string]string{v1alpha1.PolicyLabel: "true"}}, Data: map[string]string{"safety.rego": "package remedy.safety\n"}})
	kube.PrependReactor("create", "subjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authorizationv1.SubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: true}}, nil
	})
	mapper := apimeta.NewDefaultRESTMapper(nil)
	mapper.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), apimeta.RESTScopeNamespace)
	gate := (&gate.Gate{ActionNamespace: "remedy-system", Subjects: subjects,
		Checks: &gate.Validation{Kube: kube, Mapper: mapper, ActionNamespace: "remedy-system", Policy: policy.NewEngine()},
		Runs:   openRunsOf(gate.ReloadWorkflowType)}).WithFake(dyn)
	r := &Reload{Gate: gate, Events: kube, Namespaces: kube}
	return r, kube, dyn, reloadRun{t: t, r: r}
}

// appConfigMap is the fixture's ConfigMap app, in scope prod.
func appConfigMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app", Labels: map[string]string{"reload": "true", "env": "prod"}},
		Data: map[string]string{"value": "v1"}}
}

// appHash is the data hash of the fixture's ConfigMap app.
var appHash = reloadrule.ConfigMapHash(appConfigMap())

func TestCheckApproval(t *testing.T) {
	declined := reloadrule.Declined{ConfigMaps: map[string]string{"app": "a1"}}.Encode()
	for _, tc := range []struct {
		name     string
		meta     map[string]string
		template map[string]string
		changes  []reloadrule.ConfigChange
		want     ApprovalCheck
	}{
		{
			name:    "new data needs a decision",
			changes: []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "a2"}},
			want:    ApprovalCheck{},
		},
		{
			name:    "declined data is not asked again",
			meta:    map[string]string{v1alpha1.DeclinedAnnotation: declined},
			changes: []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "a1"}},
			want:    ApprovalCheck{Declined: []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "a1"}}, Current: true},
		},
		{
			name:    "newer data than the declined is asked about",
			meta:    map[string]string{v1alpha1.DeclinedAnnotation: declined},
			changes: []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "a2"}},
			want:    ApprovalCheck{},
		},
		{
			name:     "data already on the pod template rolls nothing",
			template: map[string]string{v1alpha1.ConfigHashAnnotation("app"): "a2"},
			changes:  []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "a2"}},
			want:     ApprovalCheck{Current: true},
		},
		{
			name:    "an unreadable annotation declines nothing",
			meta:    map[string]string{v1alpha1.DeclinedAnnotation: "{not json"},
			changes: []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "a1"}},
			want:    ApprovalCheck{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _, _, env := reloadFixture(t, tc.meta, tc.template)
			v, err := env.ExecuteActivity(r.CheckApproval, ChangesInput{Namespace: "shop", Kind: "Deployment", Name: "web", Changes: tc.changes})
			require.NoError(t, err)
			var got ApprovalCheck
			require.NoError(t, v.Get(&got))
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestCheckApprovalWorkloadGone(t *testing.T) {
	r, _, _, env := reloadFixture(t, nil, nil)
	_, err := env.ExecuteActivity(r.CheckApproval, ChangesInput{Namespace: "shop", Kind: "Deployment", Name: "gone"})
	require.Error(t, err)
	assert.True(t, IsWorkloadGone(err), "%v", err)
}

func TestDeclineReloadRecordsHashesEventAndMetric(t *testing.T) {
	earlier := reloadrule.Declined{ConfigMaps: map[string]string{"flags": "f1"}, Request: "reload-deployment-web-1", Decision: "Expired"}.Encode()
	template := map[string]string{v1alpha1.ConfigHashAnnotation("app"): "a0"}
	r, kube, dyn, env := reloadFixture(t, map[string]string{v1alpha1.DeclinedAnnotation: earlier}, template)
	counter := metrics.ReloadDeclined.WithLabelValues("prod", "Rejected")
	before := testutil.ToFloat64(counter)
	in := DeclineInput{Namespace: "shop", Kind: "Deployment", Name: "web", Scope: "prod",
		Changes: []reloadrule.ConfigChange{{ConfigMap: "app", Hash: "a1"}}, Request: "reload-deployment-web-2",
		Decision: gate.Decision{Decision: v1alpha1.DecisionRejected, DecidedBy: "bob", Via: v1alpha1.DecidedViaKubectl, Message: "freeze"}}
	for range 2 { // a retry changes nothing more
		_, err := env.ExecuteActivity(r.DeclineReload, in)
		require.NoError(t, err)
	}

	obj, err := dyn.Resource(appsv1.SchemeGroupVersion.WithResource("deployments")).Namespace("shop").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	got := reloadrule.ParseDeclined(obj.GetAnnotations()[v1alpha1.DeclinedAnnotation])
	assert.Equal(t, reloadrule.Declined{ConfigMaps: map[string]string{"flags": "f1", "app": "a1"}, Request: "reload-deployment-web-2", Decision: "Rejected"}, got)
	tmpl, _, _ := unstructuredAnnotations(obj.Object)
	assert.Equal(t, template, tmpl, "the pod template is untouched: nothing rolls")

	assert.Equal(t, 1.0, testutil.ToFloat64(counter)-before)
	evs, err := kube.EventsV1().Events("shop").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, evs.Items, 1)
	ev := evs.Items[0]
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.Equal(t, "ReloadDeclined", ev.Reason)
	assert.Equal(t, "web", ev.Regarding.Name)
	assert.Contains(t, ev.Note, "app=a1")
	assert.Contains(t, ev.Note, "reload-deployment-web-2 Rejected by bob via kubectl")
}

func unstructuredAnnotations(obj map[string]any) (map[string]string, bool, error) {
	return unstructured.NestedStringMap(obj, "spec", "template", "metadata", "annotations")
}

// reloadRun runs reload activities as the reload run of the workload their
// input names; its ExecuteActivity stands in for an activity environment's.
type reloadRun struct {
	t *testing.T
	r *Reload
}

func (e reloadRun) ExecuteActivity(activityFn any, args ...any) (converter.EncodedValue, error) {
	e.t.Helper()
	b, err := json.Marshal(args[0])
	require.NoError(e.t, err)
	var w struct{ Namespace, Kind, Name string }
	require.NoError(e.t, json.Unmarshal(b, &w))
	var res json.RawMessage
	err = activitytest.AsRun(e.t, v1alpha1.ReloadWorkflowID(w.Namespace, w.Kind, w.Name), e.r, activityFn, args[0], &res)
	return activitytest.JSONValue(res), err
}

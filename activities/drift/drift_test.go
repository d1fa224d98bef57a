package drift

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	dynfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	ctrlfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/activities/internal/activitytest"
	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

var (
	deployGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	rsGVR     = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	webParent = DriftObject{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web", UID: "uid-web"}
	webChild  = DriftObject{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: "shop", Name: "web-1", UID: "uid-rs"}
)

func driftObject(ref DriftObject, replicas int64, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ref.APIVersion, "kind": ref.Kind,
		"spec":   map[string]any{"replicas": replicas},
		"status": map[string]any{"observedGeneration": int64(3)},
	}}
	u.SetNamespace(ref.Namespace)
	u.SetName(ref.Name)
	u.SetUID(types.UID(ref.UID))
	u.SetResourceVersion("7")
	u.SetAnnotations(annotations)
	return u
}

func newDriftActivities(objs ...runtime.Object) (*Drift, *dynfake.FakeDynamicClient) {
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}, meta.RESTScopeNamespace)
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{deployGVR: "DeploymentList", rsGVR: "ReplicaSetList"}, objs...)
	// The gate reads what the API server would: the parents, and the decided requests.
	reads := []ctrlclient.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}}
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok && u.GetKind() == "Deployment" {
			reads = append(reads, u.DeepCopy())
		}
	}
	for _, d := range []v1alpha1.Decision{v1alpha1.DecisionApproved, v1alpha1.DecisionRejected} {
		reads = append(reads, &v1alpha1.RemediationApprovalRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "drift-" + string(d)},
			Spec: v1alpha1.RemediationApprovalRequestSpec{WorkflowID: v1alpha1.DriftWorkflowID(webParent.UID),
				SubjectRef: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
				ApprovalContext: v1alpha1.ApprovalContext{Action: gate.DriftApprovalAction,
					Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: "shop", Name: "web-1"}}},
			Status: v1alpha1.RemediationApprovalRequestStatus{Decision: d},
		})
	}
	sch := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(sch))
	utilruntime.Must(v1alpha1.AddToScheme(sch))
	utilruntime.Must(kv1.AddToScheme(sch))
	reader := ctrlfake.NewClientBuilder().WithScheme(sch).WithObjects(reads...).Build()
	config := &gate.DriftConfig{Reader: reader}
	gate := &gate.Gate{Subjects: reader, Checks: &gate.Validation{Kube: kubefake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}), Mapper: mapper}, Drift: config,
		Runs: openRunsOf(gate.DriftWorkflowType)}
	// One fake stands for both identities: the API server, not this test, tells them apart.
	gate.WithFake(dyn)
	return &Drift{Dynamic: dyn, Gate: gate, Config: config, Mapper: mapper}, dyn
}

// asDriftWorkflow runs one activity of d, once, as the drift workflow of webParent.
func asDriftWorkflow(t *testing.T, d *Drift, activityFn, in any) error {
	t.Helper()
	return activitytest.AsRun(t, v1alpha1.DriftWorkflowID(webParent.UID), d, activityFn, in, nil)
}

func TestCheckDrifts(t *testing.T) {
	hash := kv1.SpecHash(driftObject(webParent, 1, nil).Object)
	check := DriftCheck{ID: "d1", Child: webChild, Operation: "UPDATE", ParentSpecHash: hash, ParentGeneration: 3}
	approval := func(name string, gen int64) map[string]string {
		return map[string]string{kv1.AnnotationApprovals: kv1.FormatApprovals([]kv1.Approval{
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name, Generation: gen, Mode: kv1.ApprovalOnce}})}
	}
	recreated := driftObject(webChild, 1, nil)
	recreated.SetUID("uid-other")
	otherParent := driftObject(webParent, 1, nil)
	otherParent.SetUID("uid-other")
	create := check
	create.Operation, create.Child.UID = "CREATE", ""
	// at7 carries an approval naming metadata.generation 7, which
	// annotation edits since the spec change at 3 brought it to.
	at7 := func(gen int64) *unstructured.Unstructured {
		u := driftObject(webParent, 1, approval("web-1", gen))
		u.SetGeneration(7)
		return u
	}
	tests := []struct {
		name  string
		objs  []runtime.Object
		check DriftCheck
		want  string
	}{
		{name: "nothing changed", objs: []runtime.Object{driftObject(webParent, 1, nil), driftObject(webChild, 1, nil)}, check: check},
		{name: "parent spec changed", objs: []runtime.Object{driftObject(webParent, 2, nil), driftObject(webChild, 1, nil)}, check: check, want: DriftParentChanged},
		{name: "parent annotations changed only", objs: []runtime.Object{driftObject(webParent, 1, map[string]string{"a": "b"}), driftObject(webChild, 1, nil)}, check: check},
		{name: "approval for the child", objs: []runtime.Object{driftObject(webParent, 1, approval("web-1", 3)), driftObject(webChild, 1, nil)}, check: check, want: DriftApproved},
		{name: "wildcard approval", objs: []runtime.Object{driftObject(webParent, 1, approval("*", 3)), driftObject(webChild, 1, nil)}, check: check, want: DriftApproved},
		{name: "approval for another child", objs: []runtime.Object{driftObject(webParent, 1, approval("web-2", 3)), driftObject(webChild, 1, nil)}, check: check},
		{name: "approval naming the parent's metadata.generation", objs: []runtime.Object{at7(7), driftObject(webChild, 1, nil)}, check: check, want: DriftApproved},
		{name: "approval naming a generation ahead of metadata.generation", objs: []runtime.Object{at7(8), driftObject(webChild, 1, nil)}, check: check},
		{name: "approval for another generation", objs: []runtime.Object{driftObject(webParent, 1, approval("web-1", 2)), driftObject(webChild, 1, nil)}, check: check},
		{name: "unparseable approvals are ignored", objs: []runtime.Object{driftObject(webParent, 1, map[string]string{kv1.AnnotationApprovals: "yes"}), driftObject(webChild, 1, nil)}, check: check},
		{name: "child deleted", objs: []runtime.Object{driftObject(webParent, 1, nil)}, check: check, want: DriftChildDeleted},
		{name: "child recreated", objs: []runtime.Object{driftObject(webParent, 1, nil), recreated}, check: check, want: DriftChildDeleted},
		{name: "denied create never existed", objs: []runtime.Object{driftObject(webParent, 1, nil)}, check: create},
		{name: "parent deleted", check: check, want: DriftParentDeleted},
		{name: "parent recreated", objs: []runtime.Object{otherParent, driftObject(webChild, 1, nil)}, check: check, want: DriftParentDeleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _ := newDriftActivities(tt.objs...)
			var res CheckDriftsResult
			require.NoError(t, activitytest.AsRun(t, v1alpha1.DriftWorkflowID(webParent.UID), d, d.CheckDrifts, CheckDriftsInput{Parent: webParent, Drifts: []DriftCheck{tt.check}}, &res))
			if tt.want == "" {
				assert.Empty(t, res.Resolved)
				return
			}
			assert.Equal(t, []DriftResolution{{ID: "d1", Reason: tt.want}}, res.Resolved)
		})
	}
}

func TestCheckDriftsUnknownKindIsPermanent(t *testing.T) {
	d, _ := newDriftActivities()
	parent := webParent
	parent.APIVersion, parent.Kind = "example.com/v1", "Widget"
	err := asDriftWorkflow(t, d, d.CheckDrifts, CheckDriftsInput{Parent: parent, Drifts: []DriftCheck{{ID: "d1", Child: webChild}}})
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "got %v", err)
	assert.True(t, app.NonRetryable())
	assert.Equal(t, v1alpha1.ReasonInvalidParameters, app.Type())
}

func TestWriteApproval(t *testing.T) {
	existing := kv1.Approval{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-0", Mode: kv1.ApprovalAlways}
	d, dyn := newDriftActivities(driftObject(webParent, 1, map[string]string{kv1.AnnotationApprovals: kv1.FormatApprovals([]kv1.Approval{existing})}))
	var patches []string
	conflicts := 1
	dyn.PrependReactor("patch", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		patches = append(patches, string(a.(k8stesting.PatchAction).GetPatch()))
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(deployGVR.GroupResource(), "web", errors.New("modified"))
		}
		return false, nil, nil
	})
	in := DriftDecisionInput{Parent: webParent, Child: webChild, Generation: 3, ApprovalRequest: "drift-Approved"}
	for range 2 { // a retried activity adds no duplicate
		require.NoError(t, asDriftWorkflow(t, d, d.WriteApproval, in))
	}
	got := parentAnnotation(t, d, kv1.AnnotationApprovals)
	as, err := kv1.ParseApprovals(got)
	require.NoError(t, err)
	assert.Equal(t, []kv1.Approval{existing, {APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", Generation: 3, Mode: kv1.ApprovalOnce}}, as)
	require.Len(t, patches, 2, "one conflict, one retry, then nothing to do")
	assert.Contains(t, patches[1], `"resourceVersion":"7"`, "the patch is pinned to what was read")
}

func TestWriteRejection(t *testing.T) {
	d, _ := newDriftActivities(driftObject(webParent, 1, nil))
	in := DriftDecisionInput{Parent: webParent, Child: webChild, Generation: 3, Reason: "the cloud is fine, the controller is wrong", ApprovalRequest: "drift-Rejected"}
	for range 2 {
		require.NoError(t, asDriftWorkflow(t, d, d.WriteRejection, in))
	}
	rs, err := kv1.ParseRejections(parentAnnotation(t, d, kv1.AnnotationRejections))
	require.NoError(t, err)
	assert.Equal(t, []kv1.Rejection{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", Generation: 3, Reason: in.Reason}}, rs)
}

func TestWriteDecisionFailsForGood(t *testing.T) {
	recreated := driftObject(webParent, 1, nil)
	recreated.SetUID("uid-other")
	tests := []struct {
		name       string
		parent     *unstructured.Unstructured
		generation int64
		// request is the approval request the write names ("drift-Approved" when empty).
		request  string
		wantType string
	}{
		{name: "unparseable approvals", parent: driftObject(webParent, 1, map[string]string{kv1.AnnotationApprovals: "[{"}), generation: 3, wantType: v1alpha1.ReasonInvalidParameters},
		{name: "parent recreated", parent: recreated, generation: 3, wantType: v1alpha1.ReasonSubjectMismatch},
		{name: "no generation", parent: driftObject(webParent, 1, nil), generation: 0, wantType: v1alpha1.ReasonInvalidParameters},
		{name: "request rejected, not approved", parent: driftObject(webParent, 1, nil), generation: 3, request: "drift-Rejected", wantType: v1alpha1.ReasonSubjectMismatch},
		{name: "no such request", parent: driftObject(webParent, 1, nil), generation: 3, request: "drift-forged", wantType: v1alpha1.ReasonNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _ := newDriftActivities(tt.parent)
			if tt.request == "" {
				tt.request = "drift-Approved"
			}
			err := asDriftWorkflow(t, d, d.WriteApproval, DriftDecisionInput{Parent: webParent, Child: webChild, Generation: tt.generation, ApprovalRequest: tt.request})
			var app *temporal.ApplicationError
			require.True(t, errors.As(err, &app), "got %v", err)
			assert.True(t, app.NonRetryable())
			assert.Equal(t, tt.wantType, app.Type())
		})
	}
}

func activityEnv(d *Drift) *testsuite.TestActivityEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(d)
	return env
}

func parentAnnotation(t *testing.T, d *Drift, key string) string {
	t.Helper()
	u, err := d.Dynamic.Resource(deployGVR).Namespace("shop").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	return u.GetAnnotations()[key]
}

// A decided request is not enough in a protected namespace: the gate
// refuses the write before any client is handed out.
func TestWriteDecisionInAProtectedNamespaceIsRefused(t *testing.T) {
	d, dyn := newDriftActivities(driftObject(webParent, 1, nil))
	d.Gate.Checks.Kube = kubefake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{v1alpha1.ProtectedLabel: "true"}}})
	err := asDriftWorkflow(t, d, d.WriteApproval, DriftDecisionInput{Parent: webParent, Child: webChild, Generation: 3, ApprovalRequest: "drift-Approved"})
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "got %v", err)
	assert.Equal(t, v1alpha1.ReasonProtectedNamespace, app.Type())
	for _, a := range dyn.Actions() {
		assert.NotEqual(t, "patch", a.GetVerb(), "nothing written")
	}
}

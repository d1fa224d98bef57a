package drift

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/webhook"
)

// policyClient is a cluster-admin client that knows the Kausality type.
func policyClient(t *testing.T) ctrlclient.Client {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, kv1.AddToScheme(s))
	c, err := ctrlclient.New(harness.Config(), ctrlclient.Options{Scheme: s})
	require.NoError(t, err)
	return c
}

// applyPolicy creates p, removes it when the test ends and waits until the
// webhook resolves modes with it (Ready at its generation).
func applyPolicy(t *testing.T, p *kv1.Kausality) {
	t.Helper()
	c := policyClient(t)
	require.NoError(t, c.Create(context.Background(), p))
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	require.Eventually(t, func() bool {
		var got kv1.Kausality
		if err := c.Get(context.Background(), ctrlclient.ObjectKeyFromObject(p), &got); err != nil {
			return false
		}
		r := apimeta.FindStatusCondition(got.Status.Conditions, webhook.ConditionReady)
		return r != nil && r.Status == metav1.ConditionTrue && r.ObservedGeneration == got.Generation
	}, 30*time.Second, 50*time.Millisecond, "policy %s never became Ready", p.Name)
}

// policyFamily names the policy tests' Deployments: their drifts must not
// count as reports about other tests' "web" ReplicaSets.
const policyFamily = "policy"

func replicaSetPolicy(name string, mode kv1.Mode, ns ...string) *kv1.Kausality {
	p := &kv1.Kausality{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kv1.KausalitySpec{
		Resources: []kv1.ResourceRule{{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}}}, Mode: mode,
	}}
	if len(ns) > 0 {
		p.Spec.Namespaces = &kv1.NamespaceSelector{Names: ns}
	}
	return p
}

// revert has a person scale the family's ReplicaSet to 2 and reports
// whether the Deployment controller's revert to 0 (drift) got through: it
// lands within moments when allowed; denied, the parent gets a DriftDenied
// Event, the controller retries with backoff and the ReplicaSet stays at 2.
// (The decision counters are shared with other tests' families, so they
// only back the denial up.)
func revert(t *testing.T, f family) (reverted bool) {
	t.Helper()
	denied := decisions("drift-denied")
	_, err := f.scale(t, 2)
	require.NoError(t, err, "a person's change is a new origin")
	require.Eventually(t, func() bool {
		reverted = f.replicas(t) == 0
		return reverted || f.deniedEvent(t)
	}, driftTimeout, 50*time.Millisecond, "the revert neither landed nor was denied")
	if reverted {
		return true
	}
	require.Greater(t, decisions("drift-denied"), denied, "the ReplicaSet stayed at 2 without a denial")
	f.deniedAgain(t, 2, "a retried revert got through after a denial")
	return false
}

// deniedEvent reports whether the family's parent has a DriftDenied Event.
func (f family) deniedEvent(t *testing.T) bool {
	t.Helper()
	var list corev1.EventList
	require.NoError(t, harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(f.ns)))
	for _, e := range list.Items {
		if e.Reason == v1alpha1.ReasonDriftDenied && e.InvolvedObject.UID == f.dep.UID {
			return true
		}
	}
	return false
}

// A policy naming the namespace is more specific than the default policy
// (which leaves the mode to --default-mode=log): it enforces there only.
func TestPolicyModeByNamespace(t *testing.T) {
	strict := newNamedFamily(t, "", policyFamily)
	applyPolicy(t, replicaSetPolicy("ns-"+strict.ns, kv1.ModeEnforce, strict.ns))
	assert.False(t, revert(t, strict), "the policy naming the namespace enforces")

	other := newNamedFamily(t, "", policyFamily)
	assert.True(t, revert(t, other), "elsewhere the default policy leaves it to --default-mode=log")
}

// A policy with an object selector enforces on labelled objects only.
func TestPolicyModeByObject(t *testing.T) {
	label := "drift-test-" + fmt.Sprint(time.Now().UnixNano())
	p := replicaSetPolicy(label, kv1.ModeEnforce)
	p.Spec.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"strict": label}}
	applyPolicy(t, p)

	strict, plain := newNamedFamily(t, "", policyFamily), newNamedFamily(t, "", policyFamily)
	patchLabels(t, strict.rs, map[string]any{"strict": label})
	assert.False(t, revert(t, strict), "the labelled ReplicaSet is enforced")
	assert.True(t, revert(t, plain), "an unlabelled one is not")
}

// Two policies equally specific: the alphabetically first name wins,
// whichever was created first.
func TestPolicyTieBreakIsAlphabetical(t *testing.T) {
	f := newNamedFamily(t, "", policyFamily)
	applyPolicy(t, replicaSetPolicy(f.ns+"-b", kv1.ModeLog, f.ns))
	applyPolicy(t, replicaSetPolicy(f.ns+"-a", kv1.ModeEnforce, f.ns))
	assert.False(t, revert(t, f), "%s-a (enforce) wins the tie over %s-b (log)", f.ns, f.ns)
}

// The API server refuses bad policies with the CRD's CEL messages.
func TestPolicyValidation(t *testing.T) {
	c := policyClient(t)
	for _, tc := range []struct {
		name string
		spec kv1.KausalitySpec
		msg  string
	}{
		{"wildcard group", kv1.KausalitySpec{Resources: []kv1.ResourceRule{{APIGroups: []string{"*"}, Resources: []string{"pods"}}}}, "apiGroups cannot contain '*'"},
		{"excluded without wildcard", kv1.KausalitySpec{Resources: []kv1.ResourceRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Excluded: []string{"replicasets"}}}}, "excluded can only be used"},
		{"subresource", kv1.KausalitySpec{Resources: []kv1.ResourceRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments/status"}}}}, "subresources"},
		{"names and selector", kv1.KausalitySpec{Resources: []kv1.ResourceRule{{APIGroups: []string{"apps"}, Resources: []string{"*"}}},
			Namespaces: &kv1.NamespaceSelector{Names: []string{"a"}, Selector: &metav1.LabelSelector{}}}, "mutually exclusive"},
		{"empty override", kv1.KausalitySpec{Resources: []kv1.ResourceRule{{APIGroups: []string{"apps"}, Resources: []string{"*"}}},
			Overrides: []kv1.ModeOverride{{Mode: kv1.ModeEnforce}}}, "at least one filter"},
		{"bad mode", kv1.KausalitySpec{Resources: []kv1.ResourceRule{{APIGroups: []string{"apps"}, Resources: []string{"*"}}}, Mode: "strict"}, "Unsupported value"},
		{"empty initialization rule", kv1.KausalitySpec{Resources: []kv1.ResourceRule{{APIGroups: []string{"apps"}, Resources: []string{"*"}}},
			Initialization: []kv1.InitializationRule{{APIGroup: "apps", Kind: "Deployment"}}}, "needs conditions"},
		{"kind twice", kv1.KausalitySpec{Resources: []kv1.ResourceRule{{APIGroups: []string{"apps"}, Resources: []string{"*"}}},
			Initialization: []kv1.InitializationRule{{APIGroup: "apps", Kind: "Deployment", ObservedGeneration: true}, {APIGroup: "apps", Kind: "Deployment", Conditions: []string{"Ready"}}}}, "names a kind twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Create(context.Background(), &kv1.Kausality{ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-"}, Spec: tc.spec}, ctrlclient.DryRunAll)
			require.Error(t, err)
			assert.True(t, apierrors.IsInvalid(err), "%v", err)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func patchLabels(t *testing.T, obj ctrlclient.Object, l map[string]any) {
	t.Helper()
	patch := map[string]any{"metadata": map[string]any{"labels": l}}
	require.NoError(t, harness.Kube().Patch(context.Background(), obj, ctrlclient.RawPatch("application/merge-patch+json", mustJSON(patch))))
}

// The ReplicaSet controller's Pods are children of their ReplicaSet: a
// Pod's trace is the Deployment's origin, the ReplicaSet's hop and its own.
// The Deployment controller copying the Deployment's annotations onto the
// ReplicaSet leaves the ReplicaSet's kausality annotations alone.
func TestPodTraceHasBothHops(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	// The ReplicaSet's controller must be known (it recorded itself with a
	// status update) before it creates Pods; then a person scales up.
	dep := harness.Deployment(t, ns, "pods", 0)
	require.Eventually(t, func() bool {
		for _, rs := range replicaSets(t, ns) {
			if rs.Annotations[kv1.AnnotationControllers] != "" {
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "the ReplicaSet controller never recorded itself")
	require.NoError(t, harness.Kube().Patch(ctx, dep, ctrlclient.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":1}}`))))

	var pod corev1.Pod
	require.Eventually(t, func() bool {
		var list corev1.PodList
		require.NoError(t, harness.Kube().List(ctx, &list, ctrlclient.InNamespace(ns)))
		if len(list.Items) == 0 {
			return false
		}
		pod = list.Items[0]
		return true
	}, 30*time.Second, 50*time.Millisecond, "the ReplicaSet controller created no Pod")
	owner := metav1.GetControllerOf(&pod)
	require.NotNil(t, owner)
	require.Equal(t, "ReplicaSet", owner.Kind)

	trace, err := kv1.ParseTrace(pod.Annotations[kv1.AnnotationTrace])
	require.NoError(t, err)
	require.Len(t, trace, 3, "origin, ReplicaSet hop, Pod hop: %s", pod.Annotations[kv1.AnnotationTrace])
	assert.Equal(t, []string{"Deployment", "ReplicaSet", "Pod"}, []string{trace[0].Kind, trace[1].Kind, trace[2].Kind})
	assert.Equal(t, dep.Name, trace[0].Name)
	assert.Equal(t, owner.Name, trace[1].Name)
	assert.Equal(t, pod.GenerateName, trace[2].Name, "a generateName Pod's hop carries the prefix it was created with")
	assert.Contains(t, trace[1].User, "deployment-controller")
	assert.Contains(t, trace[2].User, "replicaset-controller")

	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: owner.Name}}
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rs), rs))
	rsTrace := rs.Annotations[kv1.AnnotationTrace]
	require.Equal(t, mustTrace(t, rsTrace), trace[:2], "the Pod's trace extends its ReplicaSet's")

	// A metadata edit of the Deployment: its controller copies the
	// Deployment's annotations, its kausality ones included, onto the ReplicaSet.
	patchAnnotations(t, dep, map[string]any{"example.com/note": "copied"})
	rs = harness.Eventually(t, rs, 30*time.Second, func(r *appsv1.ReplicaSet) bool { return r.Annotations["example.com/note"] == "copied" })
	assert.Equal(t, rsTrace, rs.Annotations[kv1.AnnotationTrace], "the copy must not overwrite the ReplicaSet's trace")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(&pod), &pod))
	assert.Len(t, mustTrace(t, pod.Annotations[kv1.AnnotationTrace]), 3)
}

func mustTrace(t *testing.T, s string) kv1.Trace {
	t.Helper()
	tr, err := kv1.ParseTrace(s)
	require.NoError(t, err)
	return tr
}

// kubectl get kpol shows a policy's mode, the webhook's --default-mode
// (log here) for a policy that names none.
func TestPolicyModeColumn(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode kv1.Mode
		want kv1.Mode
	}{
		{"mode-default", "", kv1.ModeLog},
		{"mode-enforce", kv1.ModeEnforce, kv1.ModeEnforce},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := replicaSetPolicy(tc.name, tc.mode, "kpol-mode-nowhere")
			applyPolicy(t, p)
			c := policyClient(t)
			require.Eventually(t, func() bool {
				var got kv1.Kausality
				return c.Get(context.Background(), ctrlclient.ObjectKeyFromObject(p), &got) == nil && got.Status.Mode == tc.want
			}, 10*time.Second, 50*time.Millisecond, "status.mode of %s is not %s", tc.name, tc.want)
		})
	}
}

package drift

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

const driftTimeout = 30 * time.Second

// receiver is one test's callback URL: it records every DriftReport POSTed to it.
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	reports []kv1.DriftReport
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var rep kv1.DriftReport
		if err := json.NewDecoder(req.Body).Decode(&rep); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.reports = append(r.reports, rep)
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) phases() []kv1.DriftReportPhase {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []kv1.DriftReportPhase
	for _, rep := range r.reports {
		out = append(out, rep.Spec.Phase)
	}
	return out
}

func (r *receiver) waitPhases(t *testing.T, want ...kv1.DriftReportPhase) []kv1.DriftReport {
	t.Helper()
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(want, r.phases()) }, driftTimeout, 50*time.Millisecond,
		"want reports %v", want)
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]kv1.DriftReport(nil), r.reports...)
}

// drifted is a Deployment and its ReplicaSet, as the webhook would report a
// drift of them.
type drifted struct {
	dep    *appsv1.Deployment
	rs     *appsv1.ReplicaSet
	signal workflows.DriftSignal
}

// newDrift creates a Deployment, waits for the Deployment controller's
// ReplicaSet, and builds the drift signal the webhook would send when the
// controller changes that ReplicaSet while the Deployment is unchanged.
// rep is the reporting of a Kausality policy for the test's namespace: the
// signal names no URL, the worker finds them there.
func newDrift(t *testing.T, rep kv1.DriftReporting) drifted {
	t.Helper()
	ns := harness.Namespace(t)
	reportTo(t, ns, rep)
	return driftIn(t, ns, "web")
}

// driftIn is newDrift of a Deployment name in namespace ns, whose reporting is left as it is.
func driftIn(t *testing.T, ns, name string) drifted {
	t.Helper()
	ctx := context.Background()
	d := drifted{dep: harness.Deployment(t, ns, name, 0)}
	require.Eventually(t, func() bool {
		var list appsv1.ReplicaSetList
		require.NoError(t, harness.Kube().List(ctx, &list, ctrlclient.InNamespace(ns)))
		for i := range list.Items {
			if metav1.IsControlledBy(&list.Items[i], d.dep) {
				d.rs = &list.Items[i]
				return true
			}
		}
		return false
	}, driftTimeout, 50*time.Millisecond, "no ReplicaSet for %s/%s", ns, name)

	parent := &unstructured.Unstructured{}
	parent.SetAPIVersion("apps/v1")
	parent.SetKind("Deployment")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(d.dep), parent))
	oldRS, err := json.Marshal(d.rs)
	require.NoError(t, err)
	newRS := d.rs.DeepCopy()
	newRS.Spec.Replicas = ptr.To[int32](3)
	newJSON, err := json.Marshal(newRS)
	require.NoError(t, err)
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	d.signal = workflows.DriftSignal{
		ID: hex.EncodeToString(id),
		Parent: workflows.DriftObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: d.dep.Name,
			UID: string(d.dep.UID)},
		// The Deployment's spec changed only when it was created.
		ParentGeneration: 1,
		ParentSpecHash:   kv1.SpecHash(parent.Object),
		Child: workflows.DriftObjectRef{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: ns, Name: d.rs.Name,
			UID: string(d.rs.UID)},
		Operation: "UPDATE", User: "system:serviceaccount:kube-system:deployment-controller",
		Groups:    []string{"system:serviceaccounts", "system:authenticated"},
		OldObject: oldRS, NewObject: newJSON, Mode: string(kv1.ModeEnforce), Denied: true,
		DetectedAt: time.Now().UTC(),
	}
	return d
}

// reportTo creates a Kausality policy whose reporting applies to namespace
// ns, removed when the test ends.
func reportTo(t *testing.T, ns string, rep kv1.DriftReporting) {
	t.Helper()
	c := policyClient(t)
	p := replicaSetPolicy("reports-"+ns, "", ns)
	p.Spec.Reporting = &rep
	require.NoError(t, c.Create(context.Background(), p))
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
}

func to(urls ...string) kv1.DriftReporting { return kv1.DriftReporting{CallbackURLs: urls} }

func (d drifted) workflowID() string { return v1alpha1.DriftWorkflowID(string(d.dep.UID)) }

// signal sends the drift as the webhook does: signal-with-start.
func (d drifted) signalWithStart(t *testing.T) {
	t.Helper()
	_, err := harness.Temporal().SignalWithStartWorkflow(context.Background(), d.workflowID(), workflows.SignalDrift, d.signal,
		client.StartWorkflowOptions{ID: d.workflowID(), TaskQueue: workflows.TaskQueue}, "DriftWorkflow", workflows.DriftInput{Parent: d.signal.Parent})
	require.NoError(t, err)
}

// changeParent changes the Deployment's spec, which resolves its drifts.
func (d drifted) changeParent(t *testing.T) {
	t.Helper()
	patch := []byte(`{"spec":{"template":{"metadata":{"labels":{"rev":"2"}}}}}`)
	require.NoError(t, harness.Kube().Patch(context.Background(), d.dep, ctrlclient.RawPatch("application/merge-patch+json", patch)))
}

func (d drifted) status(t *testing.T) workflows.DriftStatus {
	t.Helper()
	v, err := harness.Temporal().QueryWorkflow(context.Background(), d.workflowID(), "", workflows.QueryStatus)
	require.NoError(t, err)
	var st workflows.DriftStatus
	require.NoError(t, v.Get(&st))
	return st
}

// approvalRequest waits for the drift's RemediationApprovalRequest.
func (d drifted) approvalRequest(t *testing.T) *v1alpha1.RemediationApprovalRequest {
	t.Helper()
	var found *v1alpha1.RemediationApprovalRequest
	require.Eventually(t, func() bool {
		var list v1alpha1.RemediationApprovalRequestList
		require.NoError(t, harness.Kube().List(context.Background(), &list, ctrlclient.InNamespace(d.dep.Namespace)))
		for i := range list.Items {
			if list.Items[i].Spec.WorkflowID == d.workflowID() {
				found = &list.Items[i]
				return true
			}
		}
		return false
	}, driftTimeout, 50*time.Millisecond, "no approval request for %s", d.workflowID())
	return found
}

func (d drifted) parentAnnotation(t *testing.T, key string) string {
	t.Helper()
	dep := &appsv1.Deployment{}
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(d.dep), dep))
	return dep.Annotations[key]
}

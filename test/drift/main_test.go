// Package drift tests the drift webhook and the drift workflow against the
// real API server with kube-controller-manager's Deployment controller as
// the parents' controller, and the real Temporal dev server.
package drift

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devcompose"
	"github.com/remedy-dev/remedy/test/harness"
)

// reports collects the DriftReports the drift workflows POST.
var reports = &collector{}

type collector struct {
	mu  sync.Mutex
	all []kv1.DriftReport
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var rep kv1.DriftReport
	if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.all = append(c.all, rep)
	c.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// find returns the reports about child in phase. Every test's ReplicaSet
// of Deployment "web" has the same name (the template's hash), so the
// namespace tells them apart.
func (c *collector) find(child metav1.Object, phase kv1.DriftReportPhase) []kv1.DriftReport {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []kv1.DriftReport
	for _, r := range c.all {
		if r.Spec.Child.Namespace == child.GetNamespace() && r.Spec.Child.Name == child.GetName() && r.Spec.Phase == phase {
			out = append(out, r)
		}
	}
	return out
}

func TestMain(m *testing.M) {
	srv := httptest.NewServer(reports)
	code := harness.Main(m, harness.Options{
		ControllerManager: true, Remedy: true, AuditLog: true, CRDs: []string{"test/testdata/crd"},
		// log is the default; tests that enforce set kausality.io/mode on their namespace.
		Drift:             &devcompose.DriftWebhookOptions{DefaultMode: kv1.ModeLog},
		DriftCallbackURLs: []string{srv.URL},
	})
	srv.Close()
	os.Exit(code)
}

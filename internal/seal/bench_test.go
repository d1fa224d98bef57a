package seal

import (
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// typicalStatus is what a run's status push carries, the most frequent payload.
func typicalStatus() v1alpha1.KubernetesExecutionStatus {
	now := metav1.NewMicroTime(time.Date(2026, 11, 28, 19, 0, 0, 0, time.UTC))
	var transitions []v1alpha1.PhaseTransition
	for _, p := range []v1alpha1.Phase{v1alpha1.PhasePending, v1alpha1.PhaseValidating, v1alpha1.PhaseExecuting, v1alpha1.PhaseRollbackReady} {
		transitions = append(transitions, v1alpha1.PhaseTransition{Phase: p, Message: "phase " + string(p), Time: now})
	}
	return v1alpha1.KubernetesExecutionStatus{
		Phase: v1alpha1.PhaseRollbackReady, Message: "scaled deployment web from 2 to 4 replicas", WorkflowID: "kexec/demo/scale-web",
		Requester: "alice", Target: "apps/v1/Deployment/demo/web", Sequence: 4, PhaseTransitions: transitions,
		ExecutionResults: &v1alpha1.ExecutionResults{RetriesAttempted: 0, ResourcesAffected: []v1alpha1.ResourceChange{{
			Kind: "Deployment", Namespace: "demo", Name: "web", Action: "scaled", Before: "replicas: 2", After: "replicas: 4",
		}}},
		RollbackInformation: &v1alpha1.RollbackInformation{Available: true, RollbackParameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](2)}},
	}
}

// BenchmarkConvert: one status payload to a payload and back, with the
// SDK's plain converter and sealed (docs/benchmarks.md, "sealing").
func BenchmarkConvert(b *testing.B) {
	keys, err := NewKeyring("k1", map[string][]byte{"k1": make([]byte, KeySize)})
	if err != nil {
		b.Fatal(err)
	}
	status := typicalStatus()
	for name, dc := range map[string]converter.DataConverter{"plain": converter.GetDefaultDataConverter(), "sealed": DataConverter(keys)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := dc.ToPayload(status)
				if err != nil {
					b.Fatal(err)
				}
				var out v1alpha1.KubernetesExecutionStatus
				if err := dc.FromPayload(p, &out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

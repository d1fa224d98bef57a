package operator

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// DefaultMaxOpenRunsPerNamespace is the default of --max-open-runs-per-namespace.
const DefaultMaxOpenRunsPerNamespace = 50

const (
	// openRunsRecheck is how often a held run looks for a free slot.
	openRunsRecheck = 2 * time.Second
	// admittedFor is how long a start this operator admitted counts before the
	// cache shows its workflowID: the reconciles of one namespace run
	// concurrently, and each counts from the cache.
	admittedFor = 30 * time.Second
)

// openRuns caps the runs open at once in one namespace, so that one tenant's
// executions (each polling conditions, holding a workflow and Temporal
// history) cannot crowd out the others'. A run is open from its start
// until it is Completed, Failed or RollbackReady: a run offering its rollback
// only waits on a timer. A RemediationRequest counts once; its steps are
// started by its workflow, not here.
type openRuns struct {
	limit  int
	reader ctrlclient.Reader

	mu sync.Mutex
	// admitted holds starts admitted but perhaps not in the cache yet, by namespace and run.
	admitted map[string]map[string]time.Time
}

func newOpenRuns(limit int, reader ctrlclient.Reader) *openRuns {
	if limit <= 0 {
		return nil
	}
	return &openRuns{limit: limit, reader: reader, admitted: map[string]map[string]time.Time{}}
}

// admit reports whether run (kind/name) may start in ns now, and reserves its
// slot when it may. A nil openRuns admits everything.
func (o *openRuns) admit(ctx context.Context, ns, run string, now time.Time) (bool, error) {
	if o == nil {
		return true, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	open, started, err := o.count(ctx, ns)
	if err != nil {
		return false, err
	}
	pending := o.admitted[ns]
	for r, at := range pending {
		if started[r] || now.Sub(at) > admittedFor {
			delete(pending, r)
		} else if r != run {
			open++
		}
	}
	if _, again := pending[run]; !again && open >= o.limit {
		return false, nil
	}
	if pending == nil {
		pending = map[string]time.Time{}
		o.admitted[ns] = pending
	}
	pending[run] = now
	return true, nil
}

// count reads the namespace's runs from the cache: how many are open, and
// which have started (whatever their phase).
func (o *openRuns) count(ctx context.Context, ns string) (int, map[string]bool, error) {
	opts := &ctrlclient.ListOptions{Namespace: ns, UnsafeDisableDeepCopy: ptr.To(true)}
	var kexecs v1alpha1.KubernetesExecutionList
	if err := o.reader.List(ctx, &kexecs, opts); err != nil {
		return 0, nil, fmt.Errorf("list executions in %s: %w", ns, err)
	}
	var rrs v1alpha1.RemediationRequestList
	if err := o.reader.List(ctx, &rrs, opts); err != nil {
		return 0, nil, fmt.Errorf("list remediation requests in %s: %w", ns, err)
	}
	open, started := 0, map[string]bool{}
	for i := range kexecs.Items {
		k := &kexecs.Items[i]
		if k.Status.WorkflowID == "" || isStep(k) {
			continue
		}
		started[executionRun(k.Name)] = true
		if !k.Status.Phase.Terminal() && k.Status.Phase != v1alpha1.PhaseRollbackReady {
			open++
		}
	}
	for i := range rrs.Items {
		rr := &rrs.Items[i]
		if rr.Status.WorkflowID == "" {
			continue
		}
		started[remediationRun(rr.Name)] = true
		if !rr.Status.Phase.Terminal() && rr.Status.Phase != v1alpha1.PhaseRollbackReady {
			open++
		}
	}
	return open, started, nil
}

func executionRun(name string) string   { return "KubernetesExecution/" + name }
func remediationRun(name string) string { return "RemediationRequest/" + name }

// limitedMessage says why a run waits, and until when.
func limitedMessage(ns string, limit int) string {
	return fmt.Sprintf("namespace %s has reached the operator's limit of %d open runs (--max-open-runs-per-namespace): this run starts when one of them completes, fails or offers its rollback", ns, limit)
}

// planHeldExecution keeps an execution the cap holds back Pending, not
// started, with reason OpenRunsLimited and a Warning Event the first time,
// and looks again after openRunsRecheck.
func planHeldExecution(kexec *v1alpha1.KubernetesExecution, limit int, now time.Time) executionPlan {
	cur := kexec.Status
	if cur.Phase == v1alpha1.PhasePending && cur.Reason == v1alpha1.ReasonOpenRunsLimited {
		return executionPlan{requeueAfter: openRunsRecheck}
	}
	next := cur.DeepCopy()
	next.Phase, next.Reason, next.Message, next.ObservedGeneration = v1alpha1.PhasePending, v1alpha1.ReasonOpenRunsLimited, limitedMessage(kexec.Namespace, limit), kexec.Generation
	setReady(next, kexec.Generation, now)
	return executionPlan{status: next, limited: true, requeueAfter: openRunsRecheck, events: limitedEvents(next.Message)}
}

// planHeldRemediation is planHeldExecution for a RemediationRequest.
func planHeldRemediation(rr *v1alpha1.RemediationRequest, limit int, now time.Time) plan[v1alpha1.RemediationRequestStatus] {
	cur := rr.Status
	if cur.Phase == v1alpha1.PhasePending && cur.Reason == v1alpha1.ReasonOpenRunsLimited {
		return plan[v1alpha1.RemediationRequestStatus]{requeueAfter: openRunsRecheck}
	}
	next := cur.DeepCopy()
	next.Phase, next.Reason, next.Message, next.ObservedGeneration = v1alpha1.PhasePending, v1alpha1.ReasonOpenRunsLimited, limitedMessage(rr.Namespace, limit), rr.Generation
	setCondition(&next.Conditions, next.Phase, next.Reason, next.Message, rr.Generation, now)
	return plan[v1alpha1.RemediationRequestStatus]{status: next, limited: true, requeueAfter: openRunsRecheck, events: limitedEvents(next.Message)}
}

func limitedEvents(msg string) []event {
	return []event{{corev1.EventTypeWarning, v1alpha1.ReasonOpenRunsLimited, msg}}
}

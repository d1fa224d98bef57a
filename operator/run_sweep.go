package operator

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"k8s.io/utils/clock"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// runningQuery lists the runs whose objects the sweep checks.
const runningQuery = "ExecutionStatus = 'Running' AND (WorkflowType = 'ExecutionWorkflow' OR WorkflowType = 'RemediationWorkflow')"

// runSweep asks Temporal's visibility once per interval which workflows are
// running, and wakes each quiet KubernetesExecution and RemediationRequest
// whose workflow is not among them; only those are then described
// (observeRun). One paged list per interval replaces a
// DescribeWorkflowExecution per quiet run, so a run in which nothing happens
// costs nothing of its own.
type runSweep struct {
	client   ctrlclient.Reader
	temporal client.Client
	clock    clock.PassiveClock
	every    time.Duration
	kexec    *sweptKind
	rr       *sweptKind
}

// sweptKind is a reconciler's side of the sweep: whom to mark for a look, and
// the channel that wakes them.
type sweptKind struct {
	checks *runChecks
	wake   chan ctrlevent.GenericEvent
}

func newSweptKind(checks *runChecks) *sweptKind {
	return &sweptKind{checks: checks, wake: make(chan ctrlevent.GenericEvent, 64)}
}

// NeedLeaderElection: only the leader reconciles, so only it sweeps.
func (s *runSweep) NeedLeaderElection() bool { return true }

func (s *runSweep) Start(ctx context.Context) error {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := s.sweep(ctx); err != nil {
				log.FromContext(ctx).Info("workflow sweep failed; sweeping again at the next interval", "error", err.Error())
			}
		}
	}
}

func (s *runSweep) sweep(ctx context.Context) error {
	running, err := runningWorkflows(ctx, s.temporal)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	var ks v1alpha1.KubernetesExecutionList
	if err := s.client.List(ctx, &ks); err != nil {
		return fmt.Errorf("list KubernetesExecutions: %w", err)
	}
	for i := range ks.Items {
		k := &ks.Items[i]
		st := k.Status
		if stray(st.WorkflowID, st.Phase, st.Sequence, quietSince(k), running, now, s.every) {
			s.kexec.mark(ctx, k)
		}
	}
	var rs v1alpha1.RemediationRequestList
	if err := s.client.List(ctx, &rs); err != nil {
		return fmt.Errorf("list RemediationRequests: %w", err)
	}
	for i := range rs.Items {
		r := &rs.Items[i]
		st := r.Status
		if stray(st.WorkflowID, st.Phase, st.Sequence, remediationQuietSince(r), running, now, s.every) {
			s.rr.mark(ctx, r)
		}
	}
	return nil
}

// source feeds the woken objects to their controller.
func (k *sweptKind) source() source.Source {
	return source.Channel(k.wake, &handler.EnqueueRequestForObject{})
}

func (k *sweptKind) mark(ctx context.Context, obj ctrlclient.Object) {
	k.checks.flag(ctrlclient.ObjectKeyFromObject(obj))
	select {
	case k.wake <- ctrlevent.GenericEvent{Object: obj}:
	case <-ctx.Done():
	}
}

// stray says whether an object's run, which pushes its own status (sequence
// > 0) and has been quiet for every, is missing from the running workflows.
// Quiet for every, a run started or continued recently enough to be missing
// from visibility for a moment is not mistaken for a stray.
func stray(workflowID string, phase v1alpha1.Phase, sequence int64, quiet time.Time, running map[string]bool, now time.Time, every time.Duration) bool {
	return workflowID != "" && !phase.Terminal() && sequence > 0 && now.Sub(quiet) >= every && !running[workflowID]
}

// runningWorkflows lists the IDs of running execution and remediation workflows.
func runningWorkflows(ctx context.Context, tc client.Client) (map[string]bool, error) {
	running := map[string]bool{}
	req := &workflowservice.ListWorkflowExecutionsRequest{Query: runningQuery, PageSize: 1000}
	for {
		resp, err := tc.ListWorkflow(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("list running workflows: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			running[e.GetExecution().GetWorkflowId()] = true
		}
		if req.NextPageToken = resp.GetNextPageToken(); len(req.NextPageToken) == 0 {
			return running, nil
		}
	}
}

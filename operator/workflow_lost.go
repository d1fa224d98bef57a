package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"k8s.io/apimachinery/pkg/types"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/workflows"
)

// DefaultWorkflowCheckInterval is how often the operator lists the running
// workflows (runSweep), and how long a run that pushes its status must have
// been quiet before a workflow missing from that list counts: the list is one
// paged visibility read per interval, whatever the number of runs, and only
// runs missing from it are described. For a request past requiredBy it is how
// often its workflow is looked at again. A lost run is rare (Temporal lost
// it, or someone terminated it by hand); noticing it within 2-4 minutes is
// soon enough.
const DefaultWorkflowCheckInterval = 2 * time.Minute

// checkInterval is d, or DefaultWorkflowCheckInterval when d is not positive.
func checkInterval(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return DefaultWorkflowCheckInterval
}

// missingGrace is how old an object whose status query finds no workflow
// must be before that counts as lost: a RemediationRequest's step gets its
// workflowID before its parent starts the child workflow.
const missingGrace = 30 * time.Second

// finalQueryTimeout bounds the status query of a closed workflow, which a
// worker answers by replaying its history.
const finalQueryTimeout = 10 * time.Second

// runState is what the operator found of an object's workflow.
type runState int

const (
	// runUnseen: not looked at; a status query result, if any, is an open run's.
	runUnseen runState = iota
	// runOpen: the latest run of the ID is running.
	runOpen
	// runClosed: the workflow ended by itself (completed, failed, canceled);
	// its final status, when it could be read, is the observed status.
	runClosed
	// runKilled: terminated (by hand) or timed out.
	runKilled
	// runMissing: Temporal has no workflow with the ID.
	runMissing
)

// runLook is one look at an object's workflow, and when to look again.
type runLook struct {
	state runState
	// how names how a closed workflow ended, e.g. "Terminated".
	how string
	// recheck is when an open run that pushes its status is next due a look (0: never).
	recheck time.Duration
}

// gone reports whether the workflow is no longer running.
func (l runLook) gone() bool { return l.state >= runClosed }

// lostMessage says why a run that has not written a final phase will never
// write one, or returns "" when it may still. final is the status read from a
// closed workflow (nil when it could not be read): a run that ended by itself
// with a final phase is not lost, its status is only late.
func lostMessage(id string, phase v1alpha1.Phase, l runLook, final *v1alpha1.Phase) string {
	in := ""
	if phase != "" {
		in = " while in phase " + string(phase)
	}
	switch l.state {
	case runMissing:
		return fmt.Sprintf("workflow %s does not exist in Temporal%s; nothing will finish this run", id, in)
	case runKilled:
		how := strings.ToLower(l.how)
		if l.how == "TimedOut" {
			how = "timed out"
		}
		return fmt.Sprintf("workflow %s was %s%s; nothing will finish this run", id, how, in)
	case runClosed:
		if final != nil && final.Terminal() {
			return ""
		}
		return fmt.Sprintf("workflow %s closed %s without a final phase%s; nothing will finish this run", id, l.how, in)
	}
	return ""
}

// checkDue says whether an open run that pushes its status is due a look at
// its workflow: it has been quiet (no phase written) for every, and was not
// looked at within every. Otherwise wait is how long until it is due.
func checkDue(quietSince, lastLook, now time.Time, every time.Duration) (due bool, wait time.Duration) {
	next := quietSince
	if lastLook.After(next) {
		next = lastLook
	}
	next = next.Add(every)
	if !now.Before(next) {
		return true, every
	}
	return false, next.Sub(now)
}

// runChecks remembers when each object's workflow was last looked at, so the
// events of a quiet object (its approval request's countdown) do not each
// cost a look, and which objects the sweep marked for a look (runSweep).
// Entries go when the object ends or disappears.
type runChecks struct {
	mu      sync.Mutex
	last    map[types.NamespacedName]time.Time
	flagged map[types.NamespacedName]bool
}

// flag marks key for a look at its workflow.
func (c *runChecks) flag(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flagged == nil {
		c.flagged = map[types.NamespacedName]bool{}
	}
	c.flagged[key] = true
}

// take reports whether key was marked for a look, and clears the mark.
func (c *runChecks) take(key types.NamespacedName) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := c.flagged[key]
	delete(c.flagged, key)
	return ok
}

func (c *runChecks) get(key types.NamespacedName) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last[key]
}

func (c *runChecks) set(key types.NamespacedName, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[types.NamespacedName]time.Time{}
	}
	c.last[key] = t
}

func (c *runChecks) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, key)
	delete(c.flagged, key)
}

// runSubject is what observeRun needs of an object's status.
type runSubject struct {
	key        types.NamespacedName
	workflowID string
	// runID is the recorded run ("": not recorded; the ID's latest run).
	runID    string
	phase    v1alpha1.Phase
	sequence int64
}

// observeRun looks at an object's workflow (id) as its status calls for:
// not at all once it has a final phase or before it has a workflow; by its
// status query while the run does not push (sequence 0); and, for a run that
// pushes, by a look only when the sweep found its workflow not running.
func observeRun[S any](ctx context.Context, tc client.Client, checks *runChecks, id string, o runSubject) (runLook, *S, error) {
	switch {
	case o.workflowID == "" || o.phase.Terminal():
		checks.forget(o.key)
		return runLook{}, nil, nil
	case o.sequence == 0 && o.runID == "":
		// A run not recorded yet waits for the operator (its activities
		// retry until status.runID is written): a query would wait on its
		// workflow task, which waits on the operator. Describe it instead.
		return describeRun[S](ctx, tc, id, "", true)
	case o.sequence == 0:
		return queryRun[S](ctx, tc, id, o.runID)
	case !checks.take(o.key):
		return runLook{}, nil, nil
	}
	l, s, err := describeRun[S](ctx, tc, id, o.runID, true)
	if err != nil {
		checks.flag(o.key)
	}
	return l, s, err
}

// closedLook classifies the status of a workflow that is not running.
func closedLook(s enums.WorkflowExecutionStatus) runLook {
	switch s {
	case enums.WORKFLOW_EXECUTION_STATUS_RUNNING, enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		// Continued as new: the ID's latest run carries on.
		return runLook{state: runOpen}
	case enums.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return runLook{state: runKilled, how: "Terminated"}
	case enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return runLook{state: runKilled, how: "TimedOut"}
	case enums.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return runLook{state: runClosed, how: "Completed"}
	case enums.WORKFLOW_EXECUTION_STATUS_FAILED:
		return runLook{state: runClosed, how: "Failed"}
	case enums.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return runLook{state: runClosed, how: "Canceled"}
	}
	return runLook{state: runKilled, how: s.String()}
}

// describeRun looks at run runID of id ("": the latest run); with final set
// it also reads the final status of a workflow that ended by itself (into
// *S). An object's recorded run is looked at, never a later run under its
// workflow ID, whose status is nobody's.
func describeRun[S any](ctx context.Context, tc client.Client, id, runID string, final bool) (runLook, *S, error) {
	resp, err := tc.DescribeWorkflowExecution(ctx, id, runID)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return runLook{state: runMissing}, nil, nil
	}
	if err != nil {
		return runLook{}, nil, fmt.Errorf("describe workflow %s: %w", id, err)
	}
	l := closedLook(resp.GetWorkflowExecutionInfo().GetStatus())
	if l.state != runClosed || !final {
		return l, nil, nil
	}
	s, err := finalStatus[S](ctx, tc, id, runID)
	return l, s, err
}

// queryRun queries an open run's status; a closed run is rejected by the
// server without a worker, and then classified (and its final status read)
// as describeRun does.
func queryRun[S any](ctx context.Context, tc client.Client, id, runID string) (runLook, *S, error) {
	resp, err := tc.QueryWorkflowWithOptions(ctx, &client.QueryWorkflowWithOptionsRequest{
		WorkflowID: id, RunID: runID, QueryType: workflows.QueryStatus, QueryRejectCondition: enums.QUERY_REJECT_CONDITION_NOT_OPEN,
	})
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return runLook{state: runMissing}, nil, nil
	}
	if err != nil {
		return runLook{}, nil, fmt.Errorf("query workflow %s: %w", id, err)
	}
	if rej := resp.QueryRejected; rej != nil {
		l := closedLook(rej.GetStatus())
		if l.state != runClosed {
			return l, nil, nil
		}
		s, err := finalStatus[S](ctx, tc, id, runID)
		return l, s, err
	}
	var s S
	if err := resp.QueryResult.Get(&s); err != nil {
		return runLook{}, nil, fmt.Errorf("decode status of workflow %s: %w", id, err)
	}
	return runLook{state: runOpen}, &s, nil
}

// finalStatus reads the status query of a closed workflow (a worker replays
// it). A query the workflow cannot answer leaves the final status unknown
// (nil); any other error is returned, to be retried.
func finalStatus[S any](ctx context.Context, tc client.Client, id, runID string) (*S, error) {
	qctx, cancel := context.WithTimeout(ctx, finalQueryTimeout)
	defer cancel()
	v, err := tc.QueryWorkflow(qctx, id, runID, workflows.QueryStatus)
	var qf *serviceerror.QueryFailed
	if errors.As(err, &qf) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("query closed workflow %s: %w", id, err)
	}
	var s S
	if err := v.Get(&s); err != nil {
		return nil, nil
	}
	return &s, nil
}

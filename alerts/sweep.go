package alerts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	workflowservice "go.temporal.io/api/workflowservice/v1"

	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/workflows"
)

// Lister is the part of client.Client the sweep uses.
type Lister interface {
	ListWorkflow(ctx context.Context, request *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
	SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error
}

// Sweep finds resolves Alertmanager never delivered (a lost notification, a
// receiver that was down past Alertmanager's retries): every Every it lists
// Alertmanager's active alerts and the open alert workflows, and signals a
// resolve to each workflow whose alert Alertmanager no longer holds. When
// Alertmanager cannot be read, the round is skipped: nothing is resolved on
// a guess.
//
// Nor is anything resolved while Alertmanager has been up for less than
// Grace: it keeps no alerts across a restart, and a firing alert is back in
// its list only once its sender (Prometheus, every resend delay) sends it again.
type Sweep struct {
	Temporal     Lister
	Alertmanager *alertmanager.Client
	Every        time.Duration
	// Grace after Alertmanager starts before its list is trusted (default DefaultSweepGrace).
	Grace time.Duration
	Log   logr.Logger
}

// DefaultSweepGrace is alertmanager.RestartGrace: before it has passed, a
// missing alert may still fire.
const DefaultSweepGrace = alertmanager.RestartGrace

// errRestarted skips a round: Alertmanager restarted within the grace.
type errRestarted struct{ started time.Time }

func (e errRestarted) Error() string {
	return fmt.Sprintf("Alertmanager started at %s: its senders have not sent every firing alert again yet", e.started.UTC().Format(time.RFC3339))
}

// Run sweeps until ctx ends.
func (s *Sweep) Run(ctx context.Context) {
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := s.Once(ctx)
		var restarted errRestarted
		switch {
		case errors.As(err, &restarted):
			metrics.AlertSweeps.WithLabelValues("restarted").Inc()
			s.Log.Info("alert sweep skipped: nothing is resolved on a list still filling", "reason", err.Error())
			continue
		case err != nil:
			metrics.AlertSweeps.WithLabelValues("unreachable").Inc()
			s.Log.Info("alert sweep skipped: nothing is resolved on a guess", "error", err.Error())
			continue
		}
		metrics.AlertSweeps.WithLabelValues("ok").Inc()
		if n > 0 {
			s.Log.Info("alert sweep found lost resolves", "resolved", n)
		}
	}
}

// Once sweeps one round and returns how many workflows it resolved.
func (s *Sweep) Once(ctx context.Context) (int, error) {
	// Only runs started before the list was read can be judged by it: a run
	// started since may be for a firing the list does not show yet.
	listed := time.Now()
	started, err := s.Alertmanager.Started(ctx)
	if err != nil {
		return 0, err
	}
	grace := s.Grace
	if grace <= 0 {
		grace = DefaultSweepGrace
	}
	if listed.Sub(started) < grace {
		return 0, errRestarted{started}
	}
	active, err := s.Alertmanager.Active(ctx, "")
	if err != nil {
		return 0, err
	}
	firing := make(map[string]bool, len(active))
	for _, a := range active {
		firing[a.Fingerprint] = true
	}
	resolved := 0
	var token []byte
	for {
		resp, err := s.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: "WorkflowType = 'AlertWorkflow' AND ExecutionStatus = 'Running'", NextPageToken: token, PageSize: 1000})
		if err != nil {
			return resolved, fmt.Errorf("list open alert workflows: %w", err)
		}
		for _, e := range resp.Executions {
			id := e.GetExecution().GetWorkflowId()
			fp := id[strings.LastIndex(id, "/")+1:]
			if !strings.HasPrefix(id, "alert/") || firing[fp] || !e.GetStartTime().AsTime().Before(listed) {
				continue
			}
			err := s.Temporal.SignalWorkflow(ctx, id, e.GetExecution().GetRunId(), workflows.SignalAlert, workflows.AlertSignal{Status: workflows.AlertResolved})
			if err != nil {
				s.Log.Info("lost resolve not signalled", "workflow", id, "error", err.Error())
				continue
			}
			resolved++
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return resolved, nil
		}
	}
}

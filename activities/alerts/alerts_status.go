package alerts

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/activities/status"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
)

// maxAlertRecords bounds RemediationRuleStatus.Alerts.
const maxAlertRecords = 20

// ruleStatusBackoff spreads the status writes of many alerts of one rule.
var ruleStatusBackoff = wait.Backoff{Steps: 40, Duration: 20 * time.Millisecond, Factor: 1.5, Jitter: 1, Cap: 2 * time.Second}

// AlertRecordInput is one change of what a rule did with one alert.
type AlertRecordInput struct {
	Namespace string               `json:"namespace"`
	Rule      string               `json:"rule"`
	RuleUID   string               `json:"ruleUID"`
	Record    v1alpha1.AlertRecord `json:"record"`
	// Matched counts the alert as a new match; Started as a run started.
	Matched bool `json:"matched,omitempty"`
	Started bool `json:"started,omitempty"`
	// Guard, when set, is the guard that refused (CircuitOpen, Storm, ...):
	// it sets the rule's condition of that name and records a Warning Event.
	Guard string `json:"guard,omitempty"`
	// StormUntil is set when the refusal put the rule into storm mode.
	StormUntil *time.Time `json:"stormUntil,omitempty"`
}

// RecordAlert writes the alert's record, counters, last run, refusal and
// outcome and guard conditions into the rule's status, and an Event for each
// outcome (outcomeOf) on the rule and its target. It counts each run's
// match, start, refusal and outcome once: a retried activity (its write
// landed, its answer was lost) or a retried write counts nothing again, in
// status or in metrics.
//
// Only the alert's own open run records (OpenRuns.alert): a refused run
// holds no permit, so the binding is to the run itself, not to a permit.
func (a *Alerts) RecordAlert(ctx context.Context, in AlertRecordInput) error {
	if err := a.Runs.Alert(ctx, in.Namespace, in.Rule, in.Record.Fingerprint); err != nil {
		return err
	}
	if w := in.Record.WorkflowID; w != "" && w != activity.GetInfo(ctx).WorkflowExecution.ID {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("a record of workflow %s is written by that workflow only", w))
	}
	now := metav1.Now()
	runID := activity.GetInfo(ctx).WorkflowExecution.RunID
	var counted alertCounts
	var rule *v1alpha1.RemediationRule
	// Every alert of a storm writes the same rule: conflicts are the rule, not the exception.
	err := retry.OnError(ruleStatusBackoff, apierrors.IsConflict, func() error {
		var err error
		rule, _, err = status.WriteStatus(ctx, a.Client, nil, "RemediationRule", ctrlclient.ObjectKey{Namespace: in.Namespace, Name: in.Rule}, in.RuleUID, nil,
			func(r *v1alpha1.RemediationRule) bool {
				counted = mergeAlertRecord(&r.Status, r.Generation, in, runID, now)
				return true
			})
		return err
	})
	if err != nil {
		return err
	}
	if counted.matched {
		metrics.AlertsMatched.WithLabelValues(in.Namespace).Inc()
	}
	if counted.started {
		metrics.AlertRunsStarted.WithLabelValues(in.Namespace).Inc()
	}
	rec := in.Record
	if counted.gateWait {
		metrics.AlertGateWaits.WithLabelValues(rec.Reason).Inc()
	}
	if counted.outcome != "" {
		metrics.AlertOutcomes.WithLabelValues(counted.outcome).Inc()
	}
	if counted.refused {
		metrics.AlertsRefused.WithLabelValues(rec.Reason).Inc()
		if in.Guard != "" {
			metrics.AlertGuardTrips.WithLabelValues(in.Guard).Inc()
		}
	}
	// The Event is named after the run, phase and reason, so it is recorded
	// again (once) even when a retry counts nothing: the first attempt may
	// have written the status and lost its Event.
	if outcome, typ := outcomeOf(rec.Phase, rec.Reason); outcome != "" {
		a.outcomeEvents(ctx, rule, in, runID, outcome, typ)
	}
	return nil
}

// alertCounts says what one RecordAlert counted for the first time; outcome
// is the outcome (outcomeOf) the run entered, if any.
type alertCounts struct {
	matched, started, refused, gateWait bool
	outcome                             string
}

// mergeAlertRecord writes in's record of run runID into st. A run's match,
// start and refusal are counted only when the alert's stored record does
// not show them counted for the same run already.
func mergeAlertRecord(st *v1alpha1.RemediationRuleStatus, generation int64, in AlertRecordInput, runID string, now metav1.Time) alertCounts {
	rec := in.Record
	rec.At, rec.RunID = &now, runID
	var prev *v1alpha1.AlertRecord
	for i := range st.Alerts {
		if st.Alerts[i].Fingerprint == rec.Fingerprint && runID != "" && st.Alerts[i].RunID == runID {
			prev = &st.Alerts[i]
		}
	}
	var c alertCounts
	if prev != nil {
		rec.Started = prev.Started
	}
	// Any record of this run means its match was counted: the match is a run's first record.
	if in.Matched && prev == nil {
		c.matched = true
		st.Matches++
	}
	if in.Started && !rec.Started {
		c.started, rec.Started = true, true
		st.RunsStarted++
		st.LastRun = &now
	}
	entered := prev == nil || prev.Phase != rec.Phase || prev.Reason != rec.Reason
	switch rec.Reason {
	case v1alpha1.ReasonFrozen, v1alpha1.ReasonGatedByAlert, v1alpha1.ReasonGateUnknown:
		c.gateWait = entered
	}
	if outcome, _ := outcomeOf(rec.Phase, rec.Reason); outcome != "" {
		if entered {
			c.outcome = outcome
			if st.Outcomes == nil {
				st.Outcomes = map[string]int64{}
			}
			st.Outcomes[outcome]++
		}
		if entered || st.LastOutcome == nil {
			st.LastOutcome = &v1alpha1.AlertOutcome{Outcome: outcome, Phase: rec.Phase, Reason: rec.Reason, Message: rec.Message,
				Fingerprint: rec.Fingerprint, AlertName: rec.AlertName, At: &now}
		}
	}
	if rec.Phase == v1alpha1.AlertRefused {
		c.refused = entered
		if c.refused || st.LastRefusal == nil {
			st.LastRefusal = &v1alpha1.Refusal{Reason: rec.Reason, Message: rec.Message, Fingerprint: rec.Fingerprint, At: &now}
		}
	}
	if in.StormUntil != nil {
		st.StormUntil = &metav1.Time{Time: *in.StormUntil}
	}
	if in.Guard != "" {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: in.Guard, Status: metav1.ConditionTrue, Reason: rec.Reason,
			Message: fail.Truncate(rec.Message, 1024), ObservedGeneration: generation})
	}
	out := []v1alpha1.AlertRecord{rec}
	for _, o := range st.Alerts {
		if o.Fingerprint != rec.Fingerprint && len(out) < maxAlertRecords {
			out = append(out, o)
		}
	}
	st.Alerts = out
	return c
}

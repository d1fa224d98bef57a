package activities

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

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

// RecordAlert writes the alert's record, counters, last run or refusal and
// guard conditions into the rule's status, and an Event for a refusal.
func (a *Alerts) RecordAlert(ctx context.Context, in AlertRecordInput) error {
	now := metav1.Now()
	rec := in.Record
	rec.At = &now
	refused := rec.Phase == v1alpha1.AlertRefused
	mergeRecord := func(r *v1alpha1.RemediationRule) bool {
		st := &r.Status
		if in.Matched {
			st.Matches++
		}
		if in.Started {
			st.RunsStarted++
			st.LastRun = &now
		}
		if refused {
			st.LastRefusal = &v1alpha1.Refusal{Reason: rec.Reason, Message: rec.Message, Fingerprint: rec.Fingerprint, At: &now}
		}
		if in.StormUntil != nil {
			st.StormUntil = &metav1.Time{Time: *in.StormUntil}
		}
		if in.Guard != "" {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: in.Guard, Status: metav1.ConditionTrue, Reason: rec.Reason,
				Message: truncate(rec.Message, 1024), ObservedGeneration: r.Generation})
		}
		if in.Started && rec.Phase != v1alpha1.AlertRefused {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Acting",
				Message: "the rule starts remediations for matching alerts", ObservedGeneration: r.Generation})
		}
		st.ObservedGeneration = r.Generation
		out := []v1alpha1.AlertRecord{rec}
		for _, o := range st.Alerts {
			if o.Fingerprint != rec.Fingerprint && len(out) < maxAlertRecords {
				out = append(out, o)
			}
		}
		st.Alerts = out
		return true
	}
	var rule *v1alpha1.RemediationRule
	// Every alert of a storm writes the same rule: conflicts are the rule, not the exception.
	err := retry.OnError(ruleStatusBackoff, apierrors.IsConflict, func() error {
		var err error
		rule, _, err = writeStatus(ctx, a.Client, "RemediationRule", ctrlclient.ObjectKey{Namespace: in.Namespace, Name: in.Rule}, in.RuleUID, mergeRecord)
		return err
	})
	if err != nil {
		return err
	}
	switch {
	case in.Matched:
		metrics.AlertsMatched.WithLabelValues(in.Namespace).Inc()
	case in.Started:
		metrics.AlertRunsStarted.WithLabelValues(in.Namespace).Inc()
	}
	if refused {
		metrics.AlertsRefused.WithLabelValues(rec.Reason).Inc()
	}
	if in.Guard != "" {
		metrics.AlertGuardTrips.WithLabelValues(in.Guard).Inc()
	}
	switch rec.Reason {
	case ReasonFrozen, ReasonGatedByAlert, ReasonGateUnknown:
		metrics.AlertGateWaits.WithLabelValues(rec.Reason).Inc()
	}
	if refused && rule != nil && a.Events != nil {
		a.Events.event(ctx, rule, "RemediationRule", "refused/"+rec.Fingerprint+"/"+now.Format(time.RFC3339Nano), v1alpha1.PhaseFailed, rec.Reason,
			"alert "+rec.AlertName+" ("+rec.Fingerprint+"): "+rec.Message)
	}
	return nil
}

package alerts

import (
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/remedy-dev/remedy/internal/alertrule"
)

// Recordable is the detail of a VerifyAlert refusal that the run records on
// the rule (status, Event, metric): VerifyAlert proved the alert real first
// (the run is the alert's own workflow, the fingerprint is the labels', the
// rule exists and matches, Alertmanager holds the alert as firing). A
// refusal without it (a forged or stale start) writes nothing on any rule:
// otherwise anyone who can start a workflow could write a rule's status and
// Events. The record is bound to RuleUID, so a rule deleted and created
// again under the same name is not written.
type Recordable struct {
	RuleUID string            `json:"ruleUID"`
	Runbook alertrule.Runbook `json:"runbook,omitempty"`
}

// recordable marks a permanent refusal of a proven alert; a retryable error
// stays as it is (retried, and recorded by nobody if it never succeeds).
func recordable(p Recordable, err error) error {
	var app *temporal.ApplicationError
	if err == nil || !errors.As(err, &app) || !app.NonRetryable() {
		return err
	}
	return temporal.NewNonRetryableApplicationError(app.Message(), app.Type(), app.Unwrap(), p)
}

// RecordableRefusal returns the Recordable of a VerifyAlert error, if it
// has one (the workflow decodes it from the activity's failure).
func RecordableRefusal(err error) (Recordable, bool) {
	var app *temporal.ApplicationError
	var p Recordable
	if !errors.As(err, &app) || !app.HasDetails() || app.Details(&p) != nil || p.RuleUID == "" {
		return Recordable{}, false
	}
	return p, true
}

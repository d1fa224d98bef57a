package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/alerts"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// alertOutcomesChange is the workflow.GetVersion change ID of a refusal
// recorded on the rule after VerifyAlert proved the alert real, and of the
// runbook shown in the run's memo. Runs before it (v0.1.0) recorded
// neither. Only runs that take either path carry its marker: a forged
// start's refusal and an alert without a runbook or summary run as before.
const alertOutcomesChange = "alert-outcomes-recorded"

// refused ends a run whose VerifyAlert failed. A refusal of an alert
// VerifyAlert proved real (alerts.Recordable: a missing target, a template
// that does not render, a suspended rule, no author) is recorded on the
// rule, bound to its UID: status, Event and metric. Any other refusal is a
// forged or stale start and only sets the run's own phase: whoever can
// start a workflow must not be able to write a rule's status or Events.
func (r *alertRun) refused(ctx workflow.Context, err error) {
	reason, msg := reasonOf(err, v1alpha1.ReasonSubjectMismatch), messageOf(err)
	proven, ok := alerts.RecordableRefusal(err)
	if !ok || workflow.GetVersion(ctx, alertOutcomesChange, workflow.DefaultVersion, 1) < 1 {
		r.setPhase(ctx, v1alpha1.AlertRefused, reason, msg)
		return
	}
	r.plan.RuleUID, r.plan.Runbook = proven.RuleUID, proven.Runbook
	r.result.RunbookURL, r.result.Summary = proven.Runbook.URL, proven.Runbook.Summary
	r.record(ctx, alerts.AlertRecordInput{Matched: true}, v1alpha1.AlertRefused, reason, runbookNote(msg, proven.Runbook.Note))
}

// showRunbook puts the alert's runbook and summary into the run's memo,
// which the Web UI shows with the run, and its status query.
func (r *alertRun) showRunbook(ctx workflow.Context) {
	rb := r.plan.Runbook
	r.result.RunbookURL, r.result.Summary = rb.URL, rb.Summary
	if rb.URL == "" && rb.Summary == "" && rb.Note == "" {
		return
	}
	if workflow.GetVersion(ctx, alertOutcomesChange, workflow.DefaultVersion, 1) < 1 {
		return
	}
	memo := map[string]any{"summary": rb.Summary, "runbook": rb.URL}
	if rb.Note != "" {
		memo["runbookNote"] = rb.Note
	}
	if err := workflow.UpsertMemo(ctx, memo); err != nil {
		workflow.GetLogger(ctx).Warn("runbook not shown in the run's memo", "error", err)
	}
}

// runbookNote appends why the alert's runbook_url was dropped, if it was.
func runbookNote(msg, note string) string {
	if note == "" {
		return msg
	}
	return msg + " (" + note + ")"
}

package workflows

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// The tables below name, for each branch of the workflows, the committed
// histories that take it. TestEveryBranchHasAHistory enumerates the branches
// from the source (every Reason* and Phase constant, every continue-as-new)
// and fails on one that no history reaches, so a new reason or continue-as-new
// needs a recorded history (see
// "Running the tests" in the README) or an entry in notRecorded.

// reasonHistories maps each reason (a .status.reason value or an
// ApplicationError type a workflow fails or retries with) to histories that reach it.
var reasonHistories = map[string][]string{
	v1alpha1.ReasonSucceeded:           {"execution-scale-window-closed.json", "remediation-completed.json", "execution-step-finalized.json"},
	v1alpha1.ReasonRollbackAvailable:   {"execution-scale-window-closed.json"},
	v1alpha1.ReasonRollingBack:         {"execution-scale-rolled-back.json", "remediation-rolled-back.json"},
	v1alpha1.ReasonRolledBack:          {"execution-scale-rolled-back.json", "execution-step-rolled-back.json", "remediation-rolled-back.json"},
	v1alpha1.ReasonRollbackFailed:      {"execution-rollback-failed.json", "remediation-rollback-failed.json"},
	v1alpha1.ReasonRollbackIncomplete:  {"remediation-rollback-incomplete.json"},
	v1alpha1.ReasonNoChange:            {"execution-no-change.json"},
	v1alpha1.ReasonCanceled:            {"execution-canceled.json"},
	v1alpha1.ReasonPostConditionFailed: {"execution-postcondition-failed.json", "remediation-rollback-never.json"},
	v1alpha1.ReasonPreconditionFailed:  {"execution-precondition-failed.json"},
	v1alpha1.ReasonStepFailed:          {"remediation-step-failed.json"},
	v1alpha1.ReasonApprovalRequested:   {"execution-approval-local-record.json"},
	v1alpha1.ReasonApprovalRejected:    {"execution-approval-rejected.json"},
	v1alpha1.ReasonApprovalExpired:     {"execution-approval-expired.json"},
	"InvalidParameters":                {"execution-invalid-parameters.json"},
	"Forbidden":                        {"execution-forbidden.json"},
	"NotFound":                         {"execution-not-found.json"},
	"PolicyDenied":                     {"execution-policy-denied.json"},
	"DryRunFailed":                     {"execution-dry-run-failed.json"},
	"ExecutionFailed":                  {"execution-job-collected.json"},
	"ExecutionTimeout":                 {"execution-timeout.json"},
	"PolicyMissing":                    {"execution-policy-missing.json"},
	"SubjectMismatch":                  {"execution-subject-mismatch.json", "remediation-subject-mismatch.json"},
	"CallbackRejected":                 {"drift-approval-expired.json"},
	"CallbackNotAcknowledged":          {"drift-approval-expired.json"},
	v1alpha1.ReasonProtectedNamespace:  {"reload-protected-namespace.json"},
	"WorkloadGone":                     {"reload-workload-gone.json"},
	v1alpha1.ReasonGitOpsManaged:       {"alert-gitops-refused.json"},
	v1alpha1.ReasonResolved:            {"alert-resolved-approval.json"},
	v1alpha1.ReasonRejected:            {"alert-rejected.json"},
	"Suspended":                        {"alert-suspended.json"},
	"Frozen":                           {"alert-frozen.json", "alert-frozen-approval.json"},
	"GatedByAlert":                     {"alert-gated.json"},
	v1alpha1.ReasonEscalated:           {"alert-ladder-exhausted.json"},
	v1alpha1.ReasonLadderExhausted:     {"alert-ladder-exhausted.json", "alert-ladder-paged.json"},
	v1alpha1.ReasonResolvedWhileHeld:   {"alert-resolved-while-held.json"},
}

// phaseHistories maps each v1alpha1.Phase to histories whose status reaches it.
var phaseHistories = map[string][]string{
	"Validating":      {"execution-not-found.json"},
	"WaitingApproval": {"execution-approval-local-record.json"},
	"Executing":       {"execution-restart.json", "remediation-completed.json"},
	"Verifying":       {"execution-postcondition-failed.json"},
	"RollbackReady":   {"execution-scale-window-closed.json", "execution-step-finalized.json"},
	"Completed":       {"execution-restart.json", "remediation-completed.json"},
	"Failed":          {"execution-not-found.json", "remediation-step-failed.json"},
}

// continuedHistories maps each workflow that continues as new to a run that did.
var continuedHistories = map[string]string{
	"DriftWorkflow":      "drift-continued-as-new-1.json",
	"ReloadWorkflow":     "reload-continued-as-new.json",
	"AlertGuardWorkflow": "alert-guard-continued-1.json",
}

// otherBranches are branches no reason, phase or marker tells apart.
var otherBranches = []struct {
	branch, file string
	took         func(recorded) bool
}{
	{"a RemediationRequest step (awaitParent) finalized by its request", "execution-step-finalized.json",
		func(h recorded) bool { return h.child && h.reasons[v1alpha1.ReasonSucceeded] }},
	{"a RemediationRequest step (awaitParent) rolled back by its request", "execution-step-rolled-back.json",
		func(h recorded) bool { return h.child && h.reasons[v1alpha1.ReasonRolledBack] }},
	{"a RemediationRequest step with no inverse (a restart) completes without waiting for its request", "execution-step-no-inverse.json",
		func(h recorded) bool {
			return h.child && h.reasons[v1alpha1.ReasonSucceeded] && !h.phases["RollbackReady"]
		}},
	{"a RemediationRequest refused by its up-front checks writes nothing", "remediation-checked-first.json",
		func(h recorded) bool {
			return strings.Contains(h.payloads, "every step is checked before the first write")
		}},
	{"rollbackPolicy Never keeps the steps", "remediation-rollback-never.json",
		func(h recorded) bool { return strings.Contains(h.payloads, "rollbackPolicy Never") }},
	{"a drift's approval request expires", "drift-approval-expired.json",
		func(h recorded) bool { return strings.Contains(h.payloads, `"decision":"Expired"`) }},
	{"a refused drift report is kept as undelivered", "drift-approval-expired.json",
		func(h recorded) bool { return strings.Contains(h.payloads, `"undelivered":[{`) }},
	{"a drift run continued from an earlier one resumes its open request", "drift-continued-as-new-2.json",
		func(h recorded) bool { return h.continued && strings.Contains(h.payloads, `"approvalRequiredBy":"`) }},
	{"a decision the local write could not record is recorded by the activity", "execution-approval-record-fallback.json",
		func(h recorded) bool { return h.activities["RecordDecision"] }},
	{"a reload restart refused for good fails the run", "reload-protected-namespace.json",
		func(h recorded) bool { return h.closed == "EVENT_TYPE_WORKFLOW_EXECUTION_FAILED" }},
	{"an alert run silences its alert while remediating, renews and expires the silence", "alert-silenced.json",
		func(h recorded) bool { return h.activities["HoldSilence"] && h.activities["EndSilence"] }},
	{"a reload whose workload is gone ends without failing", "reload-workload-gone.json",
		func(h recorded) bool {
			return h.closed == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED" && h.reasons["WorkloadGone"]
		}},
}

// notRecorded are the branches with no history, and why. Keep it short.
var notRecorded = map[string]string{
	"phase " + "Pending": "a run's state before its first phase change: never written, pushed or returned",
	"reason MalformedSignal": "the reason of a Warning Event the worker records outside the history for a signal a run " +
		"cannot decode, never a run's reason (workflows/signals_test.go, test/integration/signal_warnings_test.go)",
	"reason ApproverRefused": "the reason of a Warning Event the worker records outside the history for a person's decision " +
		"from someone who may not decide, never a run's reason (workflows/approval_person_test.go, test/integration/codec_test.go)",
	"reason PolicyBroken": "the reason of a Warning Event the worker records on a policy ConfigMap that breaks the safety " +
		"policy, never a run's reason (activities/gate/policy_lastgood_test.go, test/integration/policy_broken_test.go)",
	"reason UnknownSignal": "the reason of a Warning Event the worker records outside the history for a signal no handler " +
		"reads, never a run's reason (workflows/signals_test.go, test/integration/signal_warnings_test.go)",
	"reason RefusedSignal": "the reason of a Warning Event the worker records outside the history for a signal whose payload " +
		"Remedy's parts did not seal, refused before delivery, never a run's reason (test/integration/seal_test.go)",
	"reason GateUnknown": "an alert run held because Alertmanager cannot be read for spec.blockWhileFiring; stopping the " +
		"package's shared Alertmanager would disturb every other alert test (activities/alerts/alert_gates_test.go)",
	"reason CallbackNotConfigured": "reached only when a URL leaves the configuration between a drift's detection and its report, " +
		"as the workflow posts only to URLs the worker just read (activities/drift/drift_callback_test.go)",
}

func TestEveryBranchHasAHistory(t *testing.T) {
	hs := recordedHistories(t)
	src := parseSources(t, ".", "../activities/gate", "../activities/execution", "../activities/reload", "../activities/drift",
		"../activities/alerts", "../activities/approval", "../activities/status", "../activities/fail", "../api/v1alpha1")

	for _, k := range []struct {
		kind   string
		found  map[string]bool
		sample string
		table  map[string][]string
		seen   func(recorded) map[string]bool
	}{
		{"reason", src.reasons(), v1alpha1.ReasonCanceled, reasonHistories, func(h recorded) map[string]bool { return h.reasons }},
		{"phase", src.phases(), "Completed", phaseHistories, func(h recorded) map[string]bool { return h.phases }},
	} {
		t.Run(k.kind, func(t *testing.T) {
			require.Contains(t, k.found, k.sample, "enumeration works")
			for name := range k.found {
				covered(t, hs, k.kind, name, k.table[name], func(h recorded) bool { return k.seen(h)[name] })
			}
			for name := range k.table {
				assert.Contains(t, k.found, name, "the %s table names a %s the source no longer has", k.kind, k.kind)
			}
		})
	}
	t.Run("continue-as-new", func(t *testing.T) { continuesAsNewCovered(t, hs, src) })
	t.Run("workflows", func(t *testing.T) {
		for _, w := range registeredWorkflows() {
			found := false
			for _, h := range hs {
				found = found || (h.workflowType == w && h.closed == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED")
			}
			assert.True(t, found, "no completed history of %s", w)
		}
	})
	t.Run("other", func(t *testing.T) {
		for _, b := range otherBranches {
			covered(t, hs, "branch", b.branch, []string{b.file}, b.took)
		}
	})
	t.Run("notRecorded", func(t *testing.T) { notRecordedExists(t, src) })
}

// covered checks that the branch kind name is reached by each of files, or
// is listed in notRecorded and has none.
func covered(t *testing.T, hs map[string]recorded, kind, name string, files []string, reached func(recorded) bool) {
	t.Helper()
	if why, ok := notRecorded[kind+" "+name]; ok {
		assert.Empty(t, files, "%s %s is listed as not recorded (%s) and has histories", kind, name, why)
		return
	}
	require.NotEmpty(t, files, "%s %s has no history: record one from a real run (README, Running the tests), or list it in notRecorded with the reason", kind, name)
	for _, f := range files {
		h, ok := hs[f]
		if assert.True(t, ok, "%s %s: no history %s", kind, name, f) {
			assert.True(t, reached(h), "%s %s: %s does not reach it", kind, name, f)
		}
	}
}

// continuesAsNewCovered checks that every workflow that continues as new
// has a history that did.
func continuesAsNewCovered(t *testing.T, hs map[string]recorded, src sources) {
	names := registeredWorkflows()
	targets := src.continueAsNew(t)
	require.Contains(t, targets, "DriftWorkflow", "enumeration works")
	for w := range targets {
		require.Contains(t, names, w)
		var files []string
		if f := continuedHistories[w]; f != "" {
			files = []string{f}
		}
		covered(t, hs, "continue-as-new of", w, files, func(h recorded) bool {
			return h.workflowType == w && h.closed == "EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW"
		})
	}
}

// notRecordedExists checks that notRecorded names only reasons and phases
// the source still has.
func notRecordedExists(t *testing.T, src sources) {
	for key := range notRecorded {
		kind, name, _ := strings.Cut(key, " ")
		switch kind {
		case "reason":
			assert.Contains(t, src.reasons(), name, "notRecorded lists a reason that no longer exists")
		case "phase":
			assert.Contains(t, src.phases(), name, "notRecorded lists a phase that no longer exists")
		default:
			t.Errorf("notRecorded key %q: want reason or phase", key)
		}
	}
}

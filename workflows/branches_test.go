package workflows

import (
	"encoding/base64"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

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
	covered := func(t *testing.T, kind, name string, files []string, reached func(recorded) bool) {
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
				covered(t, k.kind, name, k.table[name], func(h recorded) bool { return k.seen(h)[name] })
			}
			for name := range k.table {
				assert.Contains(t, k.found, name, "the %s table names a %s the source no longer has", k.kind, k.kind)
			}
		})
	}
	t.Run("continue-as-new", func(t *testing.T) {
		names := registeredWorkflows()
		targets := src.continueAsNew(t)
		require.Contains(t, targets, "DriftWorkflow", "enumeration works")
		for w := range targets {
			require.Contains(t, names, w)
			var files []string
			if f := continuedHistories[w]; f != "" {
				files = []string{f}
			}
			covered(t, "continue-as-new of", w, files, func(h recorded) bool {
				return h.workflowType == w && h.closed == "EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW"
			})
		}
	})
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
			covered(t, "branch", b.branch, []string{b.file}, b.took)
		}
	})
	t.Run("notRecorded", func(t *testing.T) {
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
	})
}

// recorded is what a committed history shows of the branches it took.
type recorded struct {
	workflowType string
	// child: started by a parent workflow; continued: started by continue-as-new.
	child, continued bool
	// closed is the last event's type.
	closed string
	// reasons are the "reason" values in its payloads and the types of its
	// application failures (activities', retried activities', the run's own).
	reasons map[string]bool
	phases  map[string]bool
	// activities are the types of the activities it scheduled (not local ones).
	activities map[string]bool
	// payloads is every payload decoded, one a line.
	payloads string
}

var (
	reasonField = regexp.MustCompile(`"reason":"([A-Za-z]+)"`)
	phaseField  = regexp.MustCompile(`"phase":"([A-Za-z]+)"`)
)

func recordedHistories(t *testing.T) map[string]recorded {
	t.Helper()
	files, err := filepath.Glob("testdata/histories/*.json")
	require.NoError(t, err)
	out := map[string]recorded{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var h struct {
			Events []map[string]any `json:"events"`
		}
		require.NoError(t, json.Unmarshal(b, &h), f)
		require.NotEmpty(t, h.Events, f)
		r := recorded{reasons: map[string]bool{}, phases: map[string]bool{}, activities: map[string]bool{}}
		start, _ := h.Events[0]["workflowExecutionStartedEventAttributes"].(map[string]any)
		r.workflowType = str(start, "workflowType", "name")
		r.child = start["parentWorkflowExecution"] != nil
		r.continued = str(start, "continuedExecutionRunId") != ""
		r.closed, _ = h.Events[len(h.Events)-1]["eventType"].(string)
		var payloads []string
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				if _, meta := v["metadata"]; meta {
					if data, ok := v["data"].(string); ok {
						d, err := base64.StdEncoding.DecodeString(data)
						require.NoError(t, err, f)
						payloads = append(payloads, string(d))
					}
				}
				if typ := str(v, "applicationFailureInfo", "type"); typ != "" {
					r.reasons[typ] = true
				}
				if a, ok := v["activityTaskScheduledEventAttributes"].(map[string]any); ok {
					r.activities[str(a, "activityType", "name")] = true
				}
				for _, e := range v {
					walk(e)
				}
			case []any:
				for _, e := range v {
					walk(e)
				}
			}
		}
		for _, e := range h.Events {
			walk(e)
		}
		r.payloads = strings.Join(payloads, "\n")
		for _, m := range reasonField.FindAllStringSubmatch(r.payloads, -1) {
			r.reasons[m[1]] = true
		}
		for _, m := range phaseField.FindAllStringSubmatch(r.payloads, -1) {
			r.phases[m[1]] = true
		}
		out[filepath.Base(f)] = r
	}
	return out
}

// str reads a string at path in nested JSON objects.
func str(m map[string]any, path ...string) string {
	for i, k := range path {
		if i == len(path)-1 {
			s, _ := m[k].(string)
			return s
		}
		m, _ = m[k].(map[string]any)
	}
	return ""
}

// sources are the parsed non-test Go files of some packages; dirs[0] is this one.
type sources struct {
	files map[string][]*ast.File
	dirs  []string
}

func parseSources(t *testing.T, dirs ...string) sources {
	t.Helper()
	s := sources{files: map[string][]*ast.File{}, dirs: dirs}
	fset := token.NewFileSet()
	for _, d := range dirs {
		names, err := filepath.Glob(filepath.Join(d, "*.go"))
		require.NoError(t, err)
		for _, n := range names {
			if strings.HasSuffix(n, "_test.go") || strings.HasSuffix(n, "zz_generated.deepcopy.go") {
				continue
			}
			f, err := parser.ParseFile(fset, n, nil, 0)
			require.NoError(t, err)
			s.files[d] = append(s.files[d], f)
		}
		require.NotEmpty(t, s.files[d], "no Go files in %s", d)
	}
	return s
}

// consts lists the string constants declared with a literal value in dir:
// name → value, and the type name each was declared with ("" untyped).
func (s sources) consts(dir string) (values, types map[string]string) {
	values, types = map[string]string{}, map[string]string{}
	for _, f := range s.files[dir] {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					values[n.Name] = v
					if id, ok := vs.Type.(*ast.Ident); ok {
						types[n.Name] = id.Name
					}
				}
			}
		}
	}
	return values, types
}

// reasons are the values of the Reason* constants (api/v1alpha1/reasons.go)
// that the workflows and activities use: the reasons a run can end with.
func (s sources) reasons() map[string]bool {
	values, _ := s.consts("../api/v1alpha1")
	out := map[string]bool{}
	for _, d := range s.dirs {
		for _, f := range s.files[d] {
			ast.Inspect(f, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Reason") {
					if v, ok := values[sel.Sel.Name]; ok {
						out[v] = true
					}
				}
				return true
			})
		}
	}
	return out
}

// phases are the values of every constant of type Phase in api/v1alpha1.
func (s sources) phases() map[string]bool {
	out := map[string]bool{}
	values, types := s.consts("../api/v1alpha1")
	for n, v := range values {
		if types[n] == "Phase" {
			out[v] = true
		}
	}
	return out
}

// calls returns the second argument of each call of workflow.<fn> in this package.
func (s sources) calls(fn string) []ast.Expr {
	var out []ast.Expr
	for _, f := range s.files[s.dirs[0]] {
		ast.Inspect(f, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := c.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != fn || len(c.Args) < 2 {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "workflow" {
				out = append(out, c.Args[1])
			}
			return true
		})
	}
	return out
}

// continueAsNew names the workflows every workflow.NewContinueAsNewError continues as.
func (s sources) continueAsNew(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, arg := range s.calls("NewContinueAsNewError") {
		id, ok := arg.(*ast.Ident)
		require.True(t, ok, "workflow.NewContinueAsNewError with a workflow this test cannot name: %T", arg)
		out[id.Name] = true
	}
	return out
}

type nameRegistry []string

func (r *nameRegistry) RegisterWorkflowWithOptions(_ any, o workflow.RegisterOptions) {
	*r = append(*r, o.Name)
}

func registeredWorkflows() []string {
	var r nameRegistry
	RegisterAll(&r)
	return r
}

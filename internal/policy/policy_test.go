package policy

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const safety = `package remedy.safety

deny contains msg if {
	input.namespace.labels.env == "prod"
	input.action == "delete-pod"
	msg := sprintf("delete-pod is not allowed in prod namespace %s", [input.namespace.name])
}

require_approval if input.parameters.replicas > 10

require_dry_run if input.action == "patch"

approval_timeout := "30m"
`

func TestEvalSafety(t *testing.T) {
	e := NewEngine()
	ctx := context.Background()
	mods := map[string]string{"safety.rego": safety}
	for _, tc := range []struct {
		name string
		in   SafetyInput
		want Verdict
	}{
		{"allowed", SafetyInput{Action: "scale", Parameters: map[string]any{"replicas": 3}, Namespace: NamespaceInput{Name: "shop"}},
			Verdict{ApprovalTimeout: 30 * time.Minute}},
		{"denied verbatim", SafetyInput{Action: "delete-pod", Namespace: NamespaceInput{Name: "shop", Labels: map[string]string{"env": "prod"}}},
			Verdict{Deny: []string{"delete-pod is not allowed in prod namespace shop"}, ApprovalTimeout: 30 * time.Minute}},
		{"approval", SafetyInput{Action: "scale", Parameters: map[string]any{"replicas": 50}},
			Verdict{RequireApproval: true, RequireDistinctApprover: true, ApprovalTimeout: 30 * time.Minute}},
		{"dry-run", SafetyInput{Action: "patch"}, Verdict{RequireDryRun: true, ApprovalTimeout: 30 * time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := e.EvalSafety(ctx, mods, tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, v)
		})
	}
	assert.Equal(t, 1, e.Compiles, "one content compiles once")
	_, err := e.EvalSafety(ctx, map[string]string{"safety.rego": safety + "\n# edited\n"}, SafetyInput{})
	require.NoError(t, err)
	assert.Equal(t, 2, e.Compiles, "new content compiles again")
}

// require_distinct_approver defaults to require_approval; a boolean rule
// overrides it either way, and anything else leaves the default.
func TestEvalSafetyDistinctApprover(t *testing.T) {
	e := NewEngine()
	for _, tc := range []struct {
		name, rules        string
		approval, distinct bool
	}{
		{"policy approval: on by default", "require_approval := true", true, true},
		{"no approval: off by default", "", false, false},
		{"policy turns it off", "require_approval := true\nrequire_distinct_approver := false", true, false},
		{"policy asks it for approvals the spec requires", "require_distinct_approver := true", false, true},
		{"a non-boolean keeps the default", "require_approval := true\nrequire_distinct_approver := \"no\"", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := e.EvalSafety(context.Background(), map[string]string{"safety.rego": "package remedy.safety\n" + tc.rules + "\n"}, SafetyInput{})
			require.NoError(t, err)
			assert.Equal(t, tc.approval, v.RequireApproval)
			assert.Equal(t, tc.distinct, v.RequireDistinctApprover)
		})
	}
}

func TestEvalSafetyBadModule(t *testing.T) {
	_, err := NewEngine().EvalSafety(context.Background(), map[string]string{"bad.rego": "package remedy.safety\ndeny contains if {"}, SafetyInput{})
	var ce *CompileError
	require.ErrorAs(t, err, &ce)
}

func TestEvalCondition(t *testing.T) {
	e := NewEngine()
	mod := `package checks.ready
pass if input.target.status.readyReplicas >= input.target.spec.replicas
message := sprintf("%v of %v ready", [object.get(input.target.status, "readyReplicas", 0), input.target.spec.replicas])
`
	out, err := e.EvalCondition(context.Background(), "ready", mod, ConditionInput{Target: map[string]any{
		"spec": map[string]any{"replicas": 3}, "status": map[string]any{"readyReplicas": 3}}})
	require.NoError(t, err)
	assert.Equal(t, Outcome{Pass: true, Message: "pass is true: 3 of 3 ready"}, out)

	out, err = e.EvalCondition(context.Background(), "ready", mod, ConditionInput{Target: map[string]any{
		"spec": map[string]any{"replicas": 3}, "status": map[string]any{}}})
	require.NoError(t, err)
	assert.Equal(t, Outcome{Pass: false, Message: "pass is undefined: input.target.status.readyReplicas is not in the input (input.target.status is empty): 0 of 3 ready"}, out)

	require.Error(t, e.CheckCondition(context.Background(), "broken", "package x\npass if {"))
}

// An undefined pass names the first path the condition reads that the input
// does not have, with what is there: a misspelled field is not a failed check.
func TestUndefinedPassNamesTheMissingField(t *testing.T) {
	e := NewEngine()
	target := map[string]any{"spec": map[string]any{"replicas": 3}, "status": map[string]any{"readyReplicas": 3, "replicas": 3}}
	for _, tc := range []struct{ name, rego, want string }{
		{"misspelled field", "pass if input.target.status.readyReplica >= 1", "pass is undefined: input.target.status.readyReplica is not in the input (input.target.status has readyReplicas, replicas)"},
		{"misspelled top level", "pass if input.targets.status.readyReplicas >= 1", "pass is undefined: input.targets is not in the input (input has related, target)"},
		{"every path exists", "pass if input.target.status.readyReplicas > 5", "pass is undefined"},
		{"an index is not checked", "pass if input.related[0].status.phase == \"Running\"", "pass is undefined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := e.EvalCondition(context.Background(), "ready", "package checks.ready\n"+tc.rego+"\n", ConditionInput{Target: target})
			require.NoError(t, err)
			assert.Equal(t, Outcome{Message: tc.want}, out)
		})
	}
}

// Runs that miss the cache on the same content at the same moment, as every
// run in flight does after a policy edit, share one compilation.
func TestConcurrentMissesCompileOnce(t *testing.T) {
	e := NewEngine()
	mods := map[string]string{"safety.rego": safety}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := e.EvalSafety(context.Background(), mods, SafetyInput{Action: "patch"})
			assert.NoError(t, err)
			assert.True(t, v.RequireDryRun)
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, e.Compiles)
}

func TestCheckSafety(t *testing.T) {
	e := NewEngine()
	for _, tc := range []struct {
		name    string
		modules map[string]string
		broken  bool
	}{
		{name: "a good policy", modules: map[string]string{"p.rego": safety}},
		{name: "a syntax error", modules: map[string]string{"p.rego": "package remedy.safety\n\ndeny contains msg if {"}, broken: true},
		{name: "a forbidden built-in", modules: map[string]string{"p.rego": "package remedy.safety\n\ndeny contains msg if { http.send({\"method\": \"GET\", \"url\": \"http://127.0.0.1\"}); msg := \"x\" }"}, broken: true},
		{name: "deny that is not a set", modules: map[string]string{"p.rego": "package remedy.safety\n\ndeny := \"no\""}, broken: true},
		{name: "a malformed approval_timeout", modules: map[string]string{"p.rego": "package remedy.safety\n\napproval_timeout := \"soon\""}, broken: true},
		{name: "two modules that conflict", modules: map[string]string{
			"a.rego": "package remedy.safety\n\nrequire_approval := true",
			"b.rego": "package remedy.safety\n\nrequire_approval contains x if { x := 1 }",
		}, broken: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := e.CheckSafety(context.Background(), tc.modules)
			if !tc.broken {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, IsInvalid(err), "%v", err)
		})
	}
}

package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/internal/policy/sandboxtest"
)

func TestConditionHTTPSendIsRefused(t *testing.T) {
	url, hits := sandboxtest.Listener(t)
	mod := fmt.Sprintf(`package checks.probe

resp := http.send({"method": "GET", "url": %q})

pass if resp.status_code == 200

message := resp.raw_body
`, url)
	e := NewEngine()
	ctx := context.Background()

	_, err := e.EvalCondition(ctx, "probe", mod, ConditionInput{})
	assert.Zero(t, hits.Load(), "no request left the sandbox")
	require.Error(t, err)
	assert.True(t, IsInvalid(err))
	assert.Contains(t, err.Error(), `condition "probe" uses built-in http.send`)

	err = e.CheckCondition(ctx, "probe", mod)
	require.Error(t, err)
	assert.True(t, IsInvalid(err))
	assert.Equal(t, `condition "probe" uses built-in http.send (line 3), which Remedy's sandbox does not allow: it sends HTTP requests from the worker`, err.Error())
}

func TestSafetyPolicyHTTPSendIsRefused(t *testing.T) {
	url, hits := sandboxtest.Listener(t)
	mod := fmt.Sprintf(`package remedy.safety

deny contains msg if {
	msg := http.send({"method": "POST", "url": %q, "body": input}).raw_body
}
`, url)
	_, err := NewEngine().EvalSafety(context.Background(), map[string]string{"cm/safety.rego": mod}, SafetyInput{Action: "scale"})
	assert.Zero(t, hits.Load(), "no request left the sandbox")
	require.Error(t, err)
	assert.True(t, IsInvalid(err))
	assert.Contains(t, err.Error(), `module "cm/safety.rego" uses built-in http.send (line 4), which Remedy's sandbox does not allow`)
}

// Every built-in that reaches outside is refused by name; the local ones stay.
func TestSandboxBuiltins(t *testing.T) {
	dir := t.TempDir()
	schema := filepath.Join(dir, "schema.json")
	require.NoError(t, os.WriteFile(schema, []byte(`{"type": "string"}`), 0o600))
	for _, tc := range []struct {
		builtin, expr string
	}{
		{"http.send", `http.send({"method": "GET", "url": "http://127.0.0.1:1"})`},
		{"net.lookup_ip_addr", `net.lookup_ip_addr("example.com")`},
		{"opa.runtime", `opa.runtime()`},
		{"json.match_schema", `json.match_schema({}, {"$ref": "file://` + schema + `"})`},
		{"json.verify_schema", `json.verify_schema({"$ref": "file://` + schema + `"})`},
	} {
		t.Run(tc.builtin, func(t *testing.T) {
			err := NewEngine().CheckCondition(context.Background(), "c", "package c\n\npass if "+tc.expr+"\n")
			require.Error(t, err)
			assert.Contains(t, err.Error(), `condition "c" uses built-in `+tc.builtin+` (line 3), which Remedy's sandbox does not allow`)
		})
	}

	allowed := `package c

pass if {
	time.now_ns() > 0
	net.cidr_contains("10.0.0.0/8", "10.1.2.3")
	count(numbers.range(1, 10)) == 10
	regex.match("^web-", input.target.metadata.name)
	rand.intn("seed", 10) < 10
	trace("allowed")
}

message := sprintf("%s is fine", [input.target.metadata.name])
`
	out, err := NewEngine().EvalCondition(context.Background(), "c", allowed,
		ConditionInput{Target: map[string]any{"metadata": map[string]any{"name": "web-1"}}})
	require.NoError(t, err)
	assert.Equal(t, Outcome{Pass: true, Message: "pass is true: web-1 is fine"}, out)
}

var loop = sandboxtest.Loop("checks.loop")

func TestEvaluationTimeout(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	_, err := NewEngine().EvalCondition(ctx, "loop", loop, ConditionInput{})
	elapsed := time.Since(start)
	require.Error(t, err)
	assert.True(t, IsTimeout(err), "%v", err)
	assert.False(t, IsInvalid(err))
	assert.Contains(t, err.Error(), "rego evaluation did not finish within Remedy's sandbox limit of 1s")
	assert.GreaterOrEqual(t, elapsed, time.Second, "the default limit is 1s")
	assert.Less(t, elapsed, 4*time.Second, "the evaluation stops promptly")

	// A big allocation is stopped by the same deadline.
	e := &Engine{Timeout: 100 * time.Millisecond}
	start = time.Now()
	_, err = e.EvalSafety(ctx, map[string]string{"p.rego": "package remedy.safety\n\nrequire_approval if count([x | some x in numbers.range(1, 1000000000000)]) > 0\n"}, SafetyInput{})
	require.Error(t, err)
	assert.True(t, IsTimeout(err), "%v", err)
	assert.Less(t, time.Since(start), 2*time.Second)

	// A caller's own cancellation is not the sandbox's timeout.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = NewEngine().EvalCondition(cctx, "loop", loop, ConditionInput{})
	require.Error(t, err)
	assert.False(t, IsTimeout(err), "%v", err)
}

func TestCheckConditionDoesNotEvaluate(t *testing.T) {
	start := time.Now()
	require.NoError(t, NewEngine().CheckCondition(context.Background(), "loop", loop))
	assert.Less(t, time.Since(start), 500*time.Millisecond)
}

func TestCacheEvicts(t *testing.T) {
	e := &Engine{CacheSize: 2}
	ctx := context.Background()
	eval := func(n int) {
		t.Helper()
		_, err := e.EvalCondition(ctx, "c", fmt.Sprintf("package c\n\npass if %d > 0\n", n), ConditionInput{})
		require.NoError(t, err)
	}
	eval(1)
	eval(2)
	eval(1) // 1 is now the most recently used
	assert.Equal(t, 2, e.Compiles)
	eval(3) // evicts 2
	assert.Equal(t, 3, e.Compiles)
	eval(1)
	assert.Equal(t, 3, e.Compiles, "1 stayed cached")
	eval(2)
	assert.Equal(t, 4, e.Compiles, "2 was evicted and compiles again")
	assert.Equal(t, 2, e.cache().Len())

	big := NewEngine()
	for i := range DefaultCacheSize + 10 {
		_, err := big.Eval(ctx, "data.c.pass", map[string]string{"c": fmt.Sprintf("package c\n\npass if %d > 0\n", i)}, nil)
		require.NoError(t, err)
	}
	assert.Equal(t, DefaultCacheSize, big.cache().Len(), "the default cache is bounded")
}

// The cache is bounded by the estimated bytes its entries retain, not only
// by their count: large modules evict each other, and one estimated above
// the whole bound is compiled for its caller and never kept.
func TestCacheIsBoundedInBytes(t *testing.T) {
	ctx := context.Background()
	module := func(n, size int) string {
		src := fmt.Sprintf("package c\n\npass if %d > 0\n", n)
		return src + "# " + strings.Repeat("x", size-len(src)-3) + "\n"
	}
	const size = 4 << 10
	perEntry := estimatedCost("data.c", map[string]string{"c": module(0, size)})
	e := &Engine{CacheBytes: 3 * perEntry}
	for i := range 10 {
		_, err := e.EvalCondition(ctx, "c", module(i, size), ConditionInput{})
		require.NoError(t, err)
		assert.LessOrEqual(t, e.cache().Bytes(), e.CacheBytes, "after %d", i)
	}
	assert.Equal(t, 3, e.cache().Len(), "three entries fit the byte bound")
	assert.Equal(t, 10, e.Compiles)

	_, err := e.EvalCondition(ctx, "c", module(9, size), ConditionInput{})
	require.NoError(t, err)
	assert.Equal(t, 10, e.Compiles, "the most recent stayed cached")

	huge := module(99, 16<<10)
	_, err = e.EvalCondition(ctx, "c", huge, ConditionInput{})
	require.NoError(t, err, "a module over the cache's bound still evaluates")
	assert.Equal(t, 3, e.cache().Len(), "and is not kept")
	assert.LessOrEqual(t, e.cache().Bytes(), e.CacheBytes)
	assert.Equal(t, int64(DefaultCacheBytes), int64(256<<20))
}

func TestConditionSizeIsBounded(t *testing.T) {
	over := "package c\n\npass := true\n# " + strings.Repeat("x", MaxConditionBytes) + "\n"
	for name, check := range map[string]func() error{
		"check": func() error { return NewEngine().CheckCondition(context.Background(), "big", over) },
		"eval": func() error {
			_, err := NewEngine().EvalCondition(context.Background(), "big", over, ConditionInput{})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := check()
			var tl *ConditionTooLargeError
			require.ErrorAs(t, err, &tl)
			assert.True(t, IsInvalid(err), "never retried")
			assert.Contains(t, err.Error(), `condition "big" is`)
			assert.Contains(t, err.Error(), "over Remedy's limit of 65536 bytes (64 KiB) per condition")
		})
	}
}

// Every way Remedy evaluates Rego (conditions in the worker, the safety
// policy, and the engine's own Eval they share) stops at the engine's limit,
// however long the caller's own context would let it run.
func TestEveryEvaluationHasTheTimeLimit(t *testing.T) {
	const limit = 200 * time.Millisecond
	evals := map[string]func(ctx context.Context, e *Engine) error{
		"condition": func(ctx context.Context, e *Engine) error {
			_, err := e.EvalCondition(ctx, "loop", loop, ConditionInput{})
			return err
		},
		"safety policy": func(ctx context.Context, e *Engine) error {
			_, err := e.EvalSafety(ctx, map[string]string{"loop.rego": sandboxtest.Loop(SafetyPackage)}, SafetyInput{})
			return err
		},
		"query": func(ctx context.Context, e *Engine) error {
			_, err := e.Eval(ctx, "data.checks.loop.pass", map[string]string{"loop.rego": loop}, nil)
			return err
		},
	}
	for name, eval := range evals {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			e := &Engine{Timeout: limit}
			start := time.Now()
			err := eval(ctx, e)
			require.Error(t, err)
			assert.True(t, IsTimeout(err), "%v", err)
			assert.Contains(t, err.Error(), "sandbox limit of 200ms")
			assert.Less(t, time.Since(start), 2*time.Second, "stopped at the limit, not the caller's hour")
		})
	}
}

// Package policy evaluates Remedy's Rego: the safety policy (package
// remedy.safety) and the pre/postcondition modules. Both run in a sandbox
// (sandbox.go): no built-in that reaches outside the evaluation, a time limit
// per evaluation, and a bounded cache of compiled queries keyed by the sha256
// of their sources, so each content is compiled once while it stays in use.
package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"golang.org/x/sync/singleflight"
)

// SafetyPackage is the package the safety policy must use.
const SafetyPackage = "remedy.safety"

// Defaults for an Engine's zero fields.
const (
	DefaultTimeout   = time.Second
	DefaultCacheSize = 256
	// DefaultCacheBytes bounds the compiled queries' estimated memory
	// (compiledBytesPerSourceByte per byte of source): 256 MiB, or about
	// 1.6 MiB of Rego source, far above the safety policy and conditions
	// Remedy ships, and far below what 256 modules of 64 KiB would hold.
	DefaultCacheBytes = 256 << 20
	// MaxConditionBytes bounds one condition's Rego source. Parsing is not
	// interruptible, so size is what bounds its time: a 1.5 MiB module held
	// the admission webhook for 7 s and ~150 MiB. The CRD refuses longer
	// conditions too (maxLength), but only after the mutating webhook ran.
	MaxConditionBytes = 64 << 10
)

// Engine compiles and caches Rego queries. The zero value is ready to use.
type Engine struct {
	// Timeout bounds one compilation plus evaluation; DefaultTimeout when zero.
	Timeout time.Duration
	// CacheSize is how many compiled queries are kept, least recently used
	// evicted first; DefaultCacheSize when zero. Set it before the first Eval.
	CacheSize int
	// CacheBytes bounds the cached queries' estimated retained memory;
	// DefaultCacheBytes when zero. Set it before the first Eval.
	CacheBytes int64

	mu       sync.Mutex
	prepared *queryCache // key: query + "\x00" + hash; value: rego.PreparedEvalQuery
	// compiling lets concurrent runs that miss the cache on the same content
	// share one compilation: after a policy edit, every run in flight misses at once.
	compiling singleflight.Group
	// Compiles counts compilations, for tests and benchmarks of the cache.
	Compiles int
}

// NewEngine returns an engine with the default timeout and cache size.
func NewEngine() *Engine { return &Engine{} }

// Hash is the sha256 over modules in name order.
func Hash(modules map[string]string) string {
	names := sortedKeys(modules)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%s\x00", n, modules[n])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Eval evaluates query against modules with input, compiling at most once per
// content while it stays cached. It fails with *ForbiddenBuiltinError or
// *CompileError for bad Rego and with *TimeoutError when the sandbox's time
// limit ends the evaluation.
func (e *Engine) Eval(ctx context.Context, query string, modules map[string]string, input any) (rego.ResultSet, error) {
	limit := e.timeout()
	tctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	pq, err := e.prepare(tctx, query, modules)
	if err == nil {
		var rs rego.ResultSet
		if rs, err = pq.Eval(tctx, rego.EvalInput(input)); err == nil {
			return rs, nil
		}
		err = fmt.Errorf("evaluate %s: %w", query, err)
	}
	if ctx.Err() == nil && tctx.Err() != nil {
		return nil, &TimeoutError{Limit: limit, Err: err}
	}
	return nil, err
}

// prepare returns the compiled query from the cache or compiles it in the sandbox.
func (e *Engine) prepare(ctx context.Context, query string, modules map[string]string) (rego.PreparedEvalQuery, error) {
	key := query + "\x00" + Hash(modules)
	cache := e.cache()
	if pq, ok := cache.Get(key); ok {
		return pq.(rego.PreparedEvalQuery), nil
	}
	pq, err, _ := e.compiling.Do(key, func() (any, error) {
		if pq, ok := cache.Get(key); ok {
			return pq, nil
		}
		opts := []func(*rego.Rego){rego.Query(query), rego.Capabilities(sandboxCapabilities())}
		for _, n := range sortedKeys(modules) {
			opts = append(opts, rego.Module(n, modules[n]))
		}
		pq, err := rego.New(opts...).PrepareForEval(ctx)
		if err != nil {
			if fb := forbiddenBuiltin(err); fb != nil {
				return nil, fb
			}
			return nil, &CompileError{Err: err}
		}
		cache.Add(key, pq, estimatedCost(query, modules))
		e.mu.Lock()
		e.Compiles++
		e.mu.Unlock()
		return pq, nil
	})
	var fb *ForbiddenBuiltinError
	if errors.As(err, &fb) {
		// Shared by every caller of the compilation; each names its own user (asCondition).
		own := *fb
		return rego.PreparedEvalQuery{}, &own
	}
	if err != nil {
		return rego.PreparedEvalQuery{}, err
	}
	return pq.(rego.PreparedEvalQuery), nil
}

func (e *Engine) timeout() time.Duration {
	if e.Timeout > 0 {
		return e.Timeout
	}
	return DefaultTimeout
}

func (e *Engine) cache() *queryCache {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.prepared == nil {
		size, bytes := e.CacheSize, e.CacheBytes
		if size <= 0 {
			size = DefaultCacheSize
		}
		if bytes <= 0 {
			bytes = DefaultCacheBytes
		}
		e.prepared = newQueryCache(size, bytes)
	}
	return e.prepared
}

// CompileError is a Rego module that does not parse or compile: bad input, never retried.
type CompileError struct{ Err error }

func (e *CompileError) Error() string { return "rego: " + e.Err.Error() }
func (e *CompileError) Unwrap() error { return e.Err }

// PackageOf parses a module and returns its package path, e.g. data.checks.ready.
func PackageOf(name, module string) (string, error) {
	m, err := ast.ParseModule(name, module)
	if err != nil {
		return "", &CompileError{Err: err}
	}
	return m.Package.Path.String(), nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// value returns the single value of a one-expression result set, or nil when undefined.
func value(rs rego.ResultSet) any {
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil
	}
	return rs[0].Expressions[0].Value
}

func joinNonEmpty(parts []string, sep string) string {
	var out []string
	for _, p := range parts {
		if strings.TrimSpace(p) != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

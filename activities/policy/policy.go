// Package policy evaluates Remedy's Rego: the safety policy (package
// remedy.safety) and the pre/postcondition modules. Compiled queries are
// cached by the sha256 of their sources, so each content is compiled once.
package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// SafetyPackage is the package the safety policy must use.
const SafetyPackage = "remedy.safety"

// Engine compiles and caches Rego queries.
type Engine struct {
	mu       sync.Mutex
	prepared map[string]rego.PreparedEvalQuery // key: query + "\x00" + hash
	// Compiles counts compilations, for tests and benchmarks of the cache.
	Compiles int
}

// NewEngine returns an empty engine.
func NewEngine() *Engine { return &Engine{prepared: map[string]rego.PreparedEvalQuery{}} }

// Hash is the sha256 over modules in name order.
func Hash(modules map[string]string) string {
	names := sortedKeys(modules)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%s\x00", n, modules[n])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Eval evaluates query against modules with input, compiling at most once per content.
func (e *Engine) Eval(ctx context.Context, query string, modules map[string]string, input any) (rego.ResultSet, error) {
	key := query + "\x00" + Hash(modules)
	e.mu.Lock()
	pq, ok := e.prepared[key]
	e.mu.Unlock()
	if !ok {
		opts := []func(*rego.Rego){rego.Query(query)}
		for _, n := range sortedKeys(modules) {
			opts = append(opts, rego.Module(n, modules[n]))
		}
		var err error
		if pq, err = rego.New(opts...).PrepareForEval(ctx); err != nil {
			return nil, &CompileError{Err: err}
		}
		e.mu.Lock()
		e.prepared[key] = pq
		e.Compiles++
		e.mu.Unlock()
	}
	rs, err := pq.Eval(ctx, rego.EvalInput(input))
	if err != nil {
		return nil, fmt.Errorf("evaluate %s: %w", query, err)
	}
	return rs, nil
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

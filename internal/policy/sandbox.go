package policy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The sandbox. Rego in Remedy comes from people who may create a
// KubernetesExecution (conditions) or edit the policy ConfigMaps, and runs
// inside the worker, next to its credentials. Conditions' `message` is
// written into .status, so anything a module can read, it can publish.
//
// Refused at compile time (the built-ins are absent from the compiler's
// capabilities, so a module using one does not compile):
//   - built-ins that reach outside the evaluation or read the worker itself,
//     listed in forbiddenBuiltins;
//   - with AllowNet empty, no host may be reached by anything that honours
//     OPA's allow_net (defence in depth: http.send and JSON-schema $refs).
//
// Allowed: everything else, including time.now_ns, rand.intn and uuid.rfc4122
// (non-deterministic but local), the pure net.cidr_* functions, and print and
// trace (their output goes nowhere: print statements are erased unless
// enabled, and no tracer is attached).
//
// Bounded per evaluation:
//   - time: compilation plus evaluation run under a context deadline
//     (Engine.Timeout, 1 s by default). OPA's evaluator checks for
//     cancellation at every step, and the built-ins that build large values
//     (numbers.range, net.cidr_expand, concat, replace, strings.replace_n,
//     sprintf...) check it while they build, through OPA's cancellable sinks.
//   - memory: OPA has no per-evaluation memory accounting, so memory is
//     bounded only through time: allocation stops when the deadline cancels
//     the evaluation. Measured on a 1 s limit: numbers.range(1, 1e12) ~150 MiB
//     allocated, net.cidr_expand("0.0.0.0/0") ~50 MiB, a 23-step string
//     doubling chain ~300 MiB. The one allocation the deadline could not stop,
//     a JSON-schema $ref to file:///dev/zero (read with io.ReadAll), is gone
//     with json.*_schema. Input is the target and its pods as the API server returns
//     them; a condition's source is bounded by MaxConditionBytes and a
//     policy module's by its ConfigMap (1 MiB).
//     Concurrent evaluations add up; the worker's container memory limit is
//     the backstop.
//   - size: a condition's source is at most MaxConditionBytes (64 KiB),
//     checked before it is parsed (ConditionTooLargeError): parsing does not
//     check the deadline, so size is what bounds it.
//   - cache: Engine.CacheSize compiled queries (256 by default) and
//     Engine.CacheBytes of their estimated memory (256 MiB by default,
//     estimated at 160 bytes per byte of source), LRU.

// forbiddenBuiltins maps each refused built-in to why it is refused.
var forbiddenBuiltins = map[string]string{
	ast.HTTPSend.Name:         "it sends HTTP requests from the worker",
	ast.NetLookupIPAddr.Name:  "it sends DNS queries from the worker",
	ast.OPARuntime.Name:       "it reads the worker's runtime configuration and environment",
	ast.JSONMatchSchema.Name:  "a schema $ref loads files from the worker's disk (file://) or URLs",
	ast.JSONSchemaVerify.Name: "a schema $ref loads files from the worker's disk (file://) or URLs",
}

// sandboxCapabilities is this OPA version's capabilities without the
// forbidden built-ins and with no network access. Built fresh for each
// compilation so no compiler shares it.
func sandboxCapabilities() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	caps.Builtins = slices.DeleteFunc(caps.Builtins, func(b *ast.Builtin) bool {
		_, forbidden := forbiddenBuiltins[b.Name]
		return forbidden
	})
	caps.AllowNet = []string{}
	return caps
}

// ForbiddenBuiltinError is Rego that calls a built-in the sandbox refuses:
// bad input, never retried.
type ForbiddenBuiltinError struct {
	// Kind and Name say what used it: "condition" and its name, or "module"
	// and the module's file name.
	Kind, Name string
	Line       int
	Builtin    string
}

func (e *ForbiddenBuiltinError) Error() string {
	return fmt.Sprintf("%s %q uses built-in %s (line %d), which Remedy's sandbox does not allow: %s",
		e.Kind, e.Name, e.Builtin, e.Line, forbiddenBuiltins[e.Builtin])
}

// undefinedFunction is how OPA's type checker reports a call to a function
// missing from the capabilities.
var undefinedFunction = regexp.MustCompile(`^undefined function (\S+)$`)

// forbiddenBuiltin finds, among compile errors, the first call of a forbidden built-in.
func forbiddenBuiltin(err error) *ForbiddenBuiltinError {
	var errs ast.Errors
	if !errors.As(err, &errs) {
		return nil
	}
	for _, e := range errs {
		m := undefinedFunction.FindStringSubmatch(e.Message)
		if m == nil || e.Code != ast.TypeErr {
			continue
		}
		if _, forbidden := forbiddenBuiltins[m[1]]; forbidden {
			fb := &ForbiddenBuiltinError{Kind: "module", Builtin: m[1]}
			if e.Location != nil {
				fb.Name, fb.Line = e.Location.File, e.Location.Row
			}
			return fb
		}
	}
	return nil
}

// TimeoutError is an evaluation the sandbox's time limit ended.
type TimeoutError struct {
	Limit time.Duration
	Err   error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("rego evaluation did not finish within Remedy's sandbox limit of %s: %v", e.Limit, e.Err)
}
func (e *TimeoutError) Unwrap() error { return e.Err }

// IsInvalid reports whether err is the Rego's own fault: it is too large,
// does not compile, uses a forbidden built-in, or returns a malformed result.
// Never retried.
func IsInvalid(err error) bool {
	var ce *CompileError
	var fb *ForbiddenBuiltinError
	var tl *ConditionTooLargeError
	return errors.As(err, &ce) || errors.As(err, &fb) || errors.As(err, &tl)
}

// IsTimeout reports whether err is an evaluation ended by the sandbox's time limit.
func IsTimeout(err error) bool {
	var te *TimeoutError
	return errors.As(err, &te)
}

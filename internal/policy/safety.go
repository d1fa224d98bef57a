package policy

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// SafetyInput is the document the safety policy sees (docs/policy.md).
type SafetyInput struct {
	Action     string          `json:"action"`
	Target     map[string]any  `json:"target"`
	Parameters map[string]any  `json:"parameters"`
	Namespace  NamespaceInput  `json:"namespace"`
	Requester  *RequesterInput `json:"requester"`
}

// RequesterInput is the user the execution runs for (spec.requester); null
// only for runs started before Remedy stamped requesters.
type RequesterInput struct {
	Username string   `json:"username"`
	Groups   []string `json:"groups"`
}

// NamespaceInput describes the target's namespace.
type NamespaceInput struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

// Verdict is what the safety policy decided.
type Verdict struct {
	Deny            []string `json:"deny,omitempty"`
	RequireApproval bool     `json:"requireApproval"`
	RequireDryRun   bool     `json:"requireDryRun"`
	// RequireDistinctApprover: only someone other than the requester may
	// approve. The rule require_distinct_approver when it is a boolean,
	// otherwise RequireApproval: on for the approvals the policy requires.
	RequireDistinctApprover bool          `json:"requireDistinctApprover"`
	ApprovalTimeout         time.Duration `json:"approvalTimeout,omitempty"`
}

// EvalSafety evaluates data.remedy.safety. Undefined rules take their
// permissive defaults; a malformed approval_timeout is an error.
func (e *Engine) EvalSafety(ctx context.Context, modules map[string]string, in SafetyInput) (Verdict, error) {
	rs, err := e.Eval(ctx, "data."+SafetyPackage, modules, in)
	if err != nil {
		return Verdict{}, err
	}
	doc, _ := value(rs).(map[string]any)
	var v Verdict
	switch deny := doc["deny"].(type) {
	case []any:
		for _, d := range deny {
			v.Deny = append(v.Deny, fmt.Sprint(d))
		}
	case nil:
	default:
		return Verdict{}, &CompileError{Err: fmt.Errorf("deny must be a set of messages, got %T", deny)}
	}
	sort.Strings(v.Deny)
	v.RequireApproval, _ = doc["require_approval"].(bool)
	v.RequireDryRun, _ = doc["require_dry_run"].(bool)
	v.RequireDistinctApprover = v.RequireApproval
	if b, ok := doc["require_distinct_approver"].(bool); ok {
		v.RequireDistinctApprover = b
	}
	if s, ok := doc["approval_timeout"].(string); ok && s != "" {
		if v.ApprovalTimeout, err = time.ParseDuration(s); err != nil {
			return Verdict{}, &CompileError{Err: fmt.Errorf("approval_timeout %q: %w", s, err)}
		}
	}
	return v, nil
}

// safetyProbe is a plausible input CheckSafety evaluates the policy on.
var safetyProbe = SafetyInput{
	Action:     "scale",
	Target:     map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "probe"},
	Parameters: map[string]any{"replicas": 1},
	Namespace:  NamespaceInput{Name: "default", Labels: map[string]string{"kubernetes.io/metadata.name": "default"}},
	Requester:  &RequesterInput{Username: "probe", Groups: []string{"system:authenticated"}},
}

// CheckSafety compiles the safety policy's modules in the sandbox and
// evaluates them once on a plausible input, so that a module that does not
// compile, uses a forbidden built-in, or gives a rule the wrong type is found
// before a run needs the policy. It fails only with what IsInvalid reports:
// a policy that is slow on the probe is not broken.
func (e *Engine) CheckSafety(ctx context.Context, modules map[string]string) error {
	if _, err := e.EvalSafety(ctx, modules, safetyProbe); IsInvalid(err) {
		return err
	}
	return nil
}

// Package actions is the typed catalog of remediation actions. Each action
// validates its parameters, declares the RBAC it needs, and plans its write as
// a pure function of the live object; Run applies a plan. The worker's inline
// executor and the `remedy exec` Job entrypoint share this code.
package actions

import (
	"fmt"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// Request is one action on one object.
type Request struct {
	Action string                    `json:"action"`
	Target v1alpha1.ObjectRef        `json:"target"`
	Params v1alpha1.ActionParameters `json:"params"`
	// Token makes time-like writes deterministic across retries (restart's restartedAt).
	Token string `json:"token,omitempty"`
	// Requester is who the action is made for, for the safety policy's input.
	Requester *v1alpha1.Requester `json:"requester,omitempty"`
}

// Plan is the exact write an action will make to a live object, with its
// before/after summary and the inverse action captured from the before-image.
type Plan struct {
	Change   v1alpha1.ResourceChange      `json:"change"`
	Rollback v1alpha1.RollbackInformation `json:"rollback"`
	// NoOp is true when the object is already at the target state.
	NoOp bool `json:"noOp,omitempty"`
	// Patch is the JSON merge patch to send; it pins metadata.resourceVersion
	// so a concurrent change makes the write conflict instead of clobbering it.
	Patch string `json:"patch,omitempty"`
	// Delete deletes the object instead, preconditioned on its UID and resourceVersion.
	Delete bool `json:"delete,omitempty"`
	// UID and ResourceVersion of the object the plan was made from.
	UID             string `json:"uid,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// Impact reads "replicas: 3 -> 5": the before/after summary with the field named once.
func Impact(c v1alpha1.ResourceChange) string {
	if name, _, ok := strings.Cut(c.Before, ": "); ok && strings.HasPrefix(c.After, name+": ") {
		return c.Before + " -> " + strings.TrimPrefix(c.After, name+": ")
	}
	return c.Before + " -> " + c.After
}

// Action is one entry of the catalog.
type Action interface {
	// Name is the spec.action value.
	Name() string
	// Kinds lists the target kinds the action supports.
	Kinds() []string
	// Rules is the RBAC the action's ServiceAccount needs.
	Rules() []rbacv1.PolicyRule
	// Validate checks the parameters; errors describe the bad input.
	Validate(req Request) error
	// Plan computes the write from the live object; it does no I/O.
	Plan(obj *unstructured.Unstructured, req Request) (Plan, error)
}

var catalog = map[string]Action{}

func register(a Action) { catalog[a.Name()] = a }

// Lookup returns the action called name.
func Lookup(name string) (Action, bool) {
	a, ok := catalog[name]
	return a, ok
}

// All returns the catalog sorted by name.
func All() []Action {
	out := make([]Action, 0, len(catalog))
	for _, a := range catalog {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// ServiceAccountName is the per-action identity the action runs as.
func ServiceAccountName(action string) string { return "remedy-action-" + action }

// ServiceAccountUser is the username the API server sees for that identity.
func ServiceAccountUser(namespace, action string) string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", namespace, ServiceAccountName(action))
}

// InvalidError is bad input: the run fails with reason InvalidParameters.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

func invalid(format string, args ...any) error {
	return &InvalidError{Msg: fmt.Sprintf(format, args...)}
}

// Validate checks the request against the catalog: known action, supported
// kind (by group, version and kind), and the action's own parameter rules.
func Validate(req Request) (Action, error) {
	a, ok := Lookup(req.Action)
	if !ok {
		return nil, invalid("action %q is not in this worker's catalog", req.Action)
	}
	if req.Target.Name == "" {
		return nil, invalid("target.name is required")
	}
	if _, err := TargetResource(a, req.Target); err != nil {
		return nil, err
	}
	if err := a.Validate(req); err != nil {
		return nil, err
	}
	return a, nil
}

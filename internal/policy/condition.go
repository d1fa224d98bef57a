package policy

import (
	"context"
	"errors"
	"fmt"
)

// ConditionInput is what a pre/postcondition sees: the live target and its related objects (pods).
type ConditionInput struct {
	Target  map[string]any   `json:"target"`
	Related []map[string]any `json:"related"`
}

// Outcome of one condition evaluation.
type Outcome struct {
	Pass    bool
	Message string
}

// EvalCondition evaluates the module's `pass` rule, and its optional
// `message` rule for a person-readable explanation.
func (e *Engine) EvalCondition(ctx context.Context, name, module string, in ConditionInput) (Outcome, error) {
	if err := CheckConditionSize(name, module); err != nil {
		return Outcome{}, err
	}
	pkg, err := PackageOf(name, module)
	if err != nil {
		return Outcome{}, err
	}
	rs, err := e.Eval(ctx, pkg, map[string]string{name: module}, in)
	if err != nil {
		return Outcome{}, asCondition(name, err)
	}
	doc, _ := value(rs).(map[string]any)
	pass, defined := doc["pass"].(bool)
	msg, _ := doc["message"].(string)
	switch {
	case !defined:
		msg = joinNonEmpty([]string{"pass is undefined", undefinedHint(module, in), msg}, ": ")
	case pass:
		msg = joinNonEmpty([]string{"pass is true", msg}, ": ")
	default:
		msg = joinNonEmpty([]string{"pass is false", msg}, ": ")
	}
	return Outcome{Pass: pass, Message: msg}, nil
}

// CheckCondition compiles a condition module in the sandbox without
// evaluating it, so a bad module fails validation before anything changes.
func (e *Engine) CheckCondition(ctx context.Context, name, module string) error {
	if err := CheckConditionSize(name, module); err != nil {
		return err
	}
	pkg, err := PackageOf(name, module)
	if err == nil {
		tctx, cancel := context.WithTimeout(ctx, e.timeout())
		defer cancel()
		_, err = e.prepare(tctx, pkg, map[string]string{name: module})
	}
	var fb *ForbiddenBuiltinError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fb):
		return asCondition(name, err)
	default:
		return fmt.Errorf("condition %s: %w", name, err)
	}
}

// asCondition names the condition in a forbidden built-in error, which
// then says by itself what used the built-in.
func asCondition(name string, err error) error {
	var fb *ForbiddenBuiltinError
	if errors.As(err, &fb) {
		fb.Kind, fb.Name = "condition", name
	}
	return err
}

// ConditionTooLargeError is a condition whose source is over
// MaxConditionBytes: bad input, refused before it is parsed.
type ConditionTooLargeError struct {
	Name  string
	Bytes int
}

func (e *ConditionTooLargeError) Error() string {
	return fmt.Sprintf("condition %q is %d bytes of Rego, over Remedy's limit of %d bytes (%d KiB) per condition", e.Name, e.Bytes, MaxConditionBytes, MaxConditionBytes>>10)
}

// CheckConditionSize refuses a condition over MaxConditionBytes, before
// anything parses or compiles it.
func CheckConditionSize(name, module string) error {
	if len(module) > MaxConditionBytes {
		return &ConditionTooLargeError{Name: name, Bytes: len(module)}
	}
	return nil
}

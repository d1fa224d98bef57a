// Package alertrule holds the pure parts of a RemediationRule: matching an
// alert's labels with Alertmanager's own matcher parser, and filling the
// RemediationRequest template from the alert with a fixed set of functions.
// Admission, the receiver and the worker share it, so all three read a rule
// the same way.
package alertrule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/template"
	"time"

	amlabels "github.com/prometheus/alertmanager/pkg/labels"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// NamespaceLabel is the alert label that names the namespace an alert is
// about: a rule matches only alerts whose label equals its own namespace.
const NamespaceLabel = "namespace"

// Alert is what a template sees of one alert.
type Alert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	Fingerprint  string            `json:"fingerprint"`
	StartsAt     time.Time         `json:"startsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// Matchers parses the rule's matchers with Alertmanager's parser; the
// error names every matcher that does not parse.
func Matchers(spec *v1alpha1.RemediationRuleSpec) (amlabels.Matchers, error) {
	var out amlabels.Matchers
	var errs []error
	for i, s := range spec.Matchers {
		ms, err := amlabels.ParseMatchers(s)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("matchers[%d] %q: %w", i, s, err))
		case len(ms) == 0:
			errs = append(errs, fmt.Errorf("matchers[%d] %q: no matcher", i, s))
		}
		out = append(out, ms...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// Matches reports whether the rule in namespace matches labels: every
// matcher holds, and the namespace label is the rule's namespace.
func Matches(namespace string, ms amlabels.Matchers, labels map[string]string) bool {
	if labels[NamespaceLabel] != namespace {
		return false
	}
	set := make(model.LabelSet, len(labels))
	for k, v := range labels {
		set[model.LabelName(k)] = model.LabelValue(v)
	}
	return ms.Matches(set)
}

// funcs is the whole function set templates may call.
var funcs = template.FuncMap{
	"lower":      strings.ToLower,
	"upper":      strings.ToUpper,
	"trim":       strings.TrimSpace,
	"trimPrefix": func(prefix, s string) string { return strings.TrimPrefix(s, prefix) },
	"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
	"replace":    func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
	"default": func(def string, v any) string {
		if s, ok := v.(string); ok && s != "" {
			return s
		}
		return def
	},
}

// Render is RenderFor without a workload: a template that uses .Workload
// fails.
func Render(namespace string, t v1alpha1.RemediationTemplate, a Alert) ([]v1alpha1.RemediationStep, error) {
	return RenderFor(namespace, t, a, nil, "")
}

// RenderFor fills every string of the template's steps from the alert and
// w, the workload that controls the alert's Pod; when w is nil, missing
// says why (the alert has no pod label, the Pod is gone). A label or
// workload the template names and the alert lacks is an error, not an
// empty string. The target namespace is always the rule's namespace.
func RenderFor(namespace string, t v1alpha1.RemediationTemplate, a Alert, w *Workload, missing string) ([]v1alpha1.RemediationStep, error) {
	raw, err := json.Marshal(t.Steps)
	if err != nil {
		return nil, fmt.Errorf("encode template: %w", err)
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return nil, fmt.Errorf("decode template: %w", err)
	}
	data := map[string]any{"Labels": nonNil(a.Labels), "Annotations": nonNil(a.Annotations), "Fingerprint": a.Fingerprint, "StartsAt": a.StartsAt,
		"Workload": workloadView{w: w, missing: missing}}
	tree, err = walk(tree, "steps", func(path, s string) (string, error) {
		if !strings.Contains(s, "{{") {
			return s, nil
		}
		tpl, err := parse(path, s)
		if err != nil {
			return "", err
		}
		var b bytes.Buffer
		if err := tpl.Execute(&b, data); err != nil {
			var missing *MissingWorkloadError
			if errors.As(err, &missing) {
				return "", fmt.Errorf("%s: %w", path, missing)
			}
			return "", fmt.Errorf("%s: %w", path, err)
		}
		return b.String(), nil
	})
	if err != nil {
		return nil, err
	}
	if raw, err = json.Marshal(tree); err != nil {
		return nil, fmt.Errorf("encode steps: %w", err)
	}
	var steps []v1alpha1.RemediationStep
	if err := json.Unmarshal(raw, &steps); err != nil {
		return nil, fmt.Errorf("decode rendered steps: %w", err)
	}
	for i := range steps {
		if ns := steps[i].Execution.Target.Namespace; ns != "" && ns != namespace {
			return nil, fmt.Errorf("step %s: target namespace %q is not the rule's namespace %q", steps[i].Name, ns, namespace)
		}
		steps[i].Execution.Target.Namespace = namespace
		steps[i].Execution.Requester = nil
	}
	return steps, nil
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func parse(path, s string) (*template.Template, error) {
	tpl, err := template.New(path).Funcs(funcs).Option("missingkey=error").Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tpl, nil
}

// walk calls f on every string leaf of a decoded JSON tree and replaces it.
func walk(v any, path string, f func(path, s string) (string, error)) (any, error) {
	switch t := v.(type) {
	case string:
		return f(path, t)
	case []any:
		for i := range t {
			var err error
			if t[i], err = walk(t[i], fmt.Sprintf("%s[%d]", path, i), f); err != nil {
				return nil, err
			}
		}
	case map[string]any:
		for k := range t {
			var err error
			if t[k], err = walk(t[k], path+"."+k, f); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// Check refuses, naming the field, a rule that could not run as written:
// matchers Alertmanager would not parse, templates that do not parse or call
// a function outside the fixed set, and any step whose target could leave
// the rule's namespace (a templated or foreign namespace, a cluster-scoped kind).
func Check(namespace string, spec *v1alpha1.RemediationRuleSpec) field.ErrorList {
	var errs field.ErrorList
	for i, s := range spec.Matchers {
		if _, err := amlabels.ParseMatchers(s); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "matchers").Index(i), s, "not an Alertmanager matcher: "+err.Error()))
		}
	}
	errs = append(errs, checkGates(spec)...)
	errs = append(errs, checkSteps(namespace, field.NewPath("spec", "template", "steps"), spec.Template.Steps)...)
	for i, e := range spec.Escalation {
		if e.Template != nil {
			errs = append(errs, checkSteps(namespace, field.NewPath("spec", "escalation").Index(i).Child("template", "steps"), e.Template.Steps)...)
		}
	}
	return errs
}

// Steps are every step the rule may run: its template's, then each
// escalation step's. The author must hold "execute" on all of them.
func Steps(spec *v1alpha1.RemediationRuleSpec) []v1alpha1.RemediationStep {
	steps := slices.Clone(spec.Template.Steps)
	for _, e := range spec.Escalation {
		if e.Template != nil {
			steps = append(steps, e.Template.Steps...)
		}
	}
	return steps
}

// checkSteps refuses steps that could act outside the rule's namespace or
// whose templates do not parse.
func checkSteps(namespace string, steps *field.Path, list []v1alpha1.RemediationStep) field.ErrorList {
	var errs field.ErrorList
	for i, st := range list {
		p := steps.Index(i).Child("execution")
		t := st.Execution.Target
		if t.Namespace != "" && t.Namespace != namespace {
			errs = append(errs, field.Forbidden(p.Child("target", "namespace"),
				fmt.Sprintf("a rule acts only in its own namespace %q: leave target.namespace empty or set it to %q", namespace, namespace)))
		}
		if strings.Contains(t.APIVersion+t.Kind, "{{") {
			errs = append(errs, field.Forbidden(p.Child("target"), "target.apiVersion and target.kind may not be templated"))
		}
		if t.Kind == "Node" || st.Execution.Action == "cordon" || st.Execution.Action == "uncordon" {
			errs = append(errs, field.Forbidden(p.Child("target", "kind"), "a rule acts only on objects in its own namespace, not on Nodes"))
		}
		if strings.Contains(st.Execution.Action, "{{") {
			errs = append(errs, field.Forbidden(p.Child("action"), "the action may not be templated"))
		}
		raw, err := json.Marshal(st.Execution)
		if err != nil {
			errs = append(errs, field.InternalError(p, err))
			continue
		}
		var tree any
		_ = json.Unmarshal(raw, &tree)
		_, _ = walk(tree, p.String(), func(path, s string) (string, error) {
			if strings.Contains(s, "{{") {
				if _, err := parse(path, s); err != nil {
					errs = append(errs, field.Invalid(field.NewPath(path), s, "template: "+err.Error()))
				}
			}
			return s, nil
		})
	}
	return errs
}

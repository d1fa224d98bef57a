package kausality

import (
	"fmt"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// PolicyTarget is the object a mode is resolved for.
type PolicyTarget struct {
	// Group and Resource are the request's (plural) resource.
	Group, Resource string
	Namespace       string
	NamespaceLabels map[string]string
	ObjectLabels    map[string]string
}

// Policies are Kausality policies compiled once per change, so that
// resolving a mode per request parses no selector.
type Policies struct {
	items []compiledPolicy
}

type compiledPolicy struct {
	name string
	spec *kv1.KausalitySpec
	// ns and obj are nil when the policy has no such selector.
	ns, obj labels.Selector
}

// CompilePolicies sorts the policies by name (the tie-break) and parses
// their selectors. A policy being deleted is left out; one whose selector
// does not parse is left out and named in the returned errors, so it
// matches nothing rather than everything.
func CompilePolicies(list []kv1.Kausality) (*Policies, map[string]error) {
	errs := map[string]error{}
	ps := &Policies{}
	for i := range list {
		p := &list[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		c := compiledPolicy{name: p.Name, spec: &p.Spec}
		var err error
		if n := p.Spec.Namespaces; n != nil && len(n.Names) == 0 && n.Selector != nil {
			if c.ns, err = metav1.LabelSelectorAsSelector(n.Selector); err != nil {
				errs[p.Name] = fmt.Errorf("parse namespaces.selector: %w", err)
				continue
			}
		}
		if p.Spec.ObjectSelector != nil {
			if c.obj, err = metav1.LabelSelectorAsSelector(p.Spec.ObjectSelector); err != nil {
				errs[p.Name] = fmt.Errorf("parse objectSelector: %w", err)
				continue
			}
		}
		ps.items = append(ps.items, c)
	}
	sort.Slice(ps.items, func(i, j int) bool { return ps.items[i].name < ps.items[j].name })
	return ps, errs
}

// PolicyMatch is the policy that decides an object's mode.
type PolicyMatch struct {
	Policy string
	// Mode is "" when the policy leaves it to the webhook's default.
	Mode kv1.Mode
}

// Resolve picks kausality's winner among the policies matching t: the most
// specific (namespace names 100, namespace selector 50, the resource named
// explicitly 10, an object selector 5), the alphabetically first name on a
// tie; then its first matching override sets the mode. ok is false when no
// policy matches.
func (ps *Policies) Resolve(t PolicyTarget) (m PolicyMatch, ok bool) {
	if ps == nil {
		return PolicyMatch{}, false
	}
	best, bestScore := -1, 0
	for i := range ps.items {
		c := &ps.items[i]
		if !c.matches(t) {
			continue
		}
		// Strictly greater: the earlier (alphabetically first) name keeps a tie.
		if s := specificity(c.spec, t.Group, t.Resource); best < 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	if best < 0 {
		return PolicyMatch{}, false
	}
	c := &ps.items[best]
	return PolicyMatch{Policy: c.name, Mode: overrideMode(c.spec, t)}, true
}

// Initialization is the first rule (by policy name) for parents of
// group/kind, nil when no policy has one.
func (ps *Policies) Initialization(group, kind string) *InitRule {
	if ps == nil {
		return nil
	}
	for i := range ps.items {
		for _, r := range ps.items[i].spec.Initialization {
			if r.APIGroup == group && r.Kind == kind {
				return &InitRule{Conditions: r.Conditions, ObservedGenerationConditions: r.ObservedGenerationConditions, ObservedGeneration: r.ObservedGeneration}
			}
		}
	}
	return nil
}

func (c *compiledPolicy) matches(t PolicyTarget) bool {
	if !slices.ContainsFunc(c.spec.Resources, func(r kv1.ResourceRule) bool { return ruleMatches(r, t.Group, t.Resource) }) {
		return false
	}
	if n := c.spec.Namespaces; n != nil {
		switch {
		case slices.Contains(n.Excluded, t.Namespace):
			return false
		case len(n.Names) > 0:
			if !slices.Contains(n.Names, t.Namespace) {
				return false
			}
		case c.ns != nil && !c.ns.Matches(labels.Set(t.NamespaceLabels)):
			return false
		}
	}
	return c.obj == nil || c.obj.Matches(labels.Set(t.ObjectLabels))
}

// ruleMatches: the group is listed, the resource is listed or "*", and
// not excluded.
func ruleMatches(r kv1.ResourceRule, group, resource string) bool {
	return slices.Contains(r.APIGroups, group) &&
		(slices.Contains(r.Resources, resource) || slices.Contains(r.Resources, "*")) &&
		!slices.Contains(r.Excluded, resource)
}

// specificity is kausality's score: a policy naming namespaces beats one
// selecting them by label, which beats one for all namespaces; naming the
// resource beats "*"; an object selector adds a little.
func specificity(s *kv1.KausalitySpec, group, resource string) int {
	score := 0
	if n := s.Namespaces; n != nil {
		switch {
		case len(n.Names) > 0:
			score += 100
		case n.Selector != nil:
			score += 50
		}
	}
	for _, r := range s.Resources {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) {
			score += 10
		}
	}
	if s.ObjectSelector != nil {
		score += 5
	}
	return score
}

// overrideMode is the mode of the first override whose every given filter
// matches, else the policy's own.
func overrideMode(s *kv1.KausalitySpec, t PolicyTarget) kv1.Mode {
	for _, o := range s.Overrides {
		if (len(o.APIGroups) == 0 || slices.Contains(o.APIGroups, t.Group)) &&
			(len(o.Resources) == 0 || slices.Contains(o.Resources, t.Resource)) &&
			(len(o.Namespaces) == 0 || slices.Contains(o.Namespaces, t.Namespace)) {
			return o.Mode
		}
	}
	return s.Mode
}

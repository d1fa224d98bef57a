package webhook

import (
	"fmt"
	"slices"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// DriftRules are the drift webhook configuration's rules for policies:
// per API group, CREATE, UPDATE and DELETE of the resources and UPDATE of
// their status (to learn who the controllers are). A "*" without
// exclusions stays "*" so kinds registered later are watched at once; one
// with exclusions, and the core group's, are expanded with discover. Pods
// get no status rule: kubelets write Pod status constantly and Pods are
// never parents, so the webhook would only be in their way.
func DriftRules(policies []kv1.Kausality, discover func(group string) ([]string, error)) ([]admissionregistrationv1.RuleWithOperations, error) {
	groups := map[string]map[string]bool{}
	for _, p := range policies {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, r := range p.Spec.Resources {
			for _, g := range r.APIGroups {
				names, err := ruleResources(r, g, discover)
				if err != nil {
					return nil, fmt.Errorf("expand resources of policy %s: %w", p.Name, err)
				}
				if groups[g] == nil {
					groups[g] = map[string]bool{}
				}
				for _, n := range names {
					groups[g][n] = true
				}
			}
		}
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)
	scope := admissionregistrationv1.AllScopes
	var rules []admissionregistrationv1.RuleWithOperations
	for _, g := range names {
		var res, status []string
		if groups[g]["*"] {
			res, status = []string{"*"}, []string{"*/status"}
		} else {
			for r := range groups[g] {
				res = append(res, r)
				if g != "" || r != "pods" {
					status = append(status, r+"/status")
				}
			}
			sort.Strings(res)
			sort.Strings(status)
		}
		if len(res) == 0 {
			continue
		}
		rules = append(rules, admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{g}, APIVersions: []string{"*"}, Resources: res, Scope: &scope},
		})
		if len(status) > 0 {
			rules = append(rules, admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{g}, APIVersions: []string{"*"}, Resources: status, Scope: &scope},
			})
		}
	}
	return rules, nil
}

// ruleResources are the resources r names in group g, "*" kept when it
// needs no expansion.
func ruleResources(r kv1.ResourceRule, g string, discover func(string) ([]string, error)) ([]string, error) {
	all := r.Resources
	if slices.Contains(all, "*") {
		if len(r.Excluded) == 0 && g != "" {
			return []string{"*"}, nil
		}
		var err error
		if all, err = discover(g); err != nil {
			return nil, err
		}
	}
	var out []string
	for _, n := range all {
		// Secrets never pass the drift webhook: their data would go into
		// signals and DriftReports. Admission refuses a policy naming them
		// (the CRD's rule); this keeps one admitted before that rule out too.
		if n != "*" && !slices.Contains(r.Excluded, n) && (g != "" || n != "secrets") {
			out = append(out, n)
		}
	}
	return out, nil
}

package actions

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// patchableKinds are the kinds the patch action's ServiceAccount may touch:
// "any namespaced object" is bounded here, so its Role stays explicit.
var patchableKinds = map[string]rbacv1.PolicyRule{
	"Deployment":              {APIGroups: []string{"apps"}, Resources: []string{"deployments"}},
	"StatefulSet":             {APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}},
	"DaemonSet":               {APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}},
	"ReplicaSet":              {APIGroups: []string{"apps"}, Resources: []string{"replicasets"}},
	"ConfigMap":               {APIGroups: []string{""}, Resources: []string{"configmaps"}},
	"Service":                 {APIGroups: []string{""}, Resources: []string{"services"}},
	"Job":                     {APIGroups: []string{"batch"}, Resources: []string{"jobs"}},
	"CronJob":                 {APIGroups: []string{"batch"}, Resources: []string{"cronjobs"}},
	"HorizontalPodAutoscaler": {APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"}},
}

type patch struct{}

func init() { register(patch{}) }

func (patch) Name() string { return "patch" }

func (patch) Kinds() []string {
	kinds := make([]string, 0, len(patchableKinds))
	for k := range patchableKinds {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

func (p patch) Rules() []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, k := range p.Kinds() {
		r := patchableKinds[k]
		r.Verbs = []string{"get", "patch"}
		rules = append(rules, r)
	}
	return rules
}

func (patch) Validate(req Request) error {
	body, err := patchBody(req)
	if err != nil {
		return err
	}
	for _, forbidden := range []string{"apiVersion", "kind", "status"} {
		if _, ok := body[forbidden]; ok {
			return invalid("parameters.patch must not change %s", forbidden)
		}
	}
	if md, ok := body["metadata"].(map[string]any); ok {
		// ownerReferences would hand the object to the garbage collector, and
		// finalizers could pin it forever: only labels and annotations may change.
		for k, v := range md {
			if k != "labels" && k != "annotations" {
				return invalid("parameters.patch must not change metadata.%s (only metadata.labels and metadata.annotations)", k)
			}
			if err := stringMap("metadata."+k, v); err != nil {
				return err
			}
		}
	} else if _, ok := body["metadata"]; ok {
		return invalid("parameters.patch metadata must be an object")
	}
	return nil
}

// stringMap checks a labels or annotations patch: an object whose values are
// strings, or null to remove a key; null as the whole value removes them all.
// The API server would refuse anything else only at the write.
func stringMap(field string, v any) error {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return invalid("parameters.patch %s must be an object of strings", field)
	}
	for k, val := range m {
		if _, ok := val.(string); !ok && val != nil {
			return invalid("parameters.patch %s.%s must be a string (or null to remove it)", field, k)
		}
	}
	return nil
}

func patchBody(req Request) (map[string]any, error) {
	if req.Params.Patch == nil || len(req.Params.Patch.Raw) == 0 {
		return nil, invalid("action patch needs parameters.patch")
	}
	var body map[string]any
	if err := json.Unmarshal(req.Params.Patch.Raw, &body); err != nil || body == nil {
		return nil, invalid("parameters.patch must be a JSON object (a merge patch)")
	}
	return body, nil
}

func (patch) Plan(obj *unstructured.Unstructured, req Request) (Plan, error) {
	body, err := patchBody(req)
	if err != nil {
		return Plan{}, err
	}
	inverse := inversePatch(obj.Object, body)
	// The summaries are published in .status; the inverse patch keeps the
	// real values, for the rollback only.
	before, after := summarize(ScrubSecretRefs(inverse).(map[string]any)), summarize(ScrubSecretRefs(body).(map[string]any))
	invRaw, err := json.Marshal(inverse)
	if err != nil {
		return Plan{}, fmt.Errorf("encode inverse patch: %w", err)
	}
	p := Plan{
		Change: change(obj, "patched", before, after),
		Rollback: v1alpha1.RollbackInformation{
			Available: true, RollbackAction: "patch", EstimatedRollbackDuration: "10s",
			RollbackParameters: &v1alpha1.ActionParameters{Patch: rawJSON(invRaw)},
		},
		// Decided on the real values: a changed valueFrom is a change.
		NoOp: summarize(inverse) == summarize(body),
	}
	p.Patch, err = mergePatch(obj, body)
	return p, err
}

// inversePatch is the merge patch that restores every field patch touches to
// its value in live; fields absent in live are removed with null. An object
// absent in live (labels on an object that has none) is undone key by key,
// so the rollback removes only what the patch added.
func inversePatch(live, patch map[string]any) map[string]any {
	out := map[string]any{}
	for k, pv := range patch {
		lv, exists := live[k]
		pm, pIsMap := pv.(map[string]any)
		lm, lIsMap := lv.(map[string]any)
		switch {
		case !exists && pIsMap:
			out[k] = inversePatch(map[string]any{}, pm)
		case !exists:
			out[k] = nil
		case pIsMap && lIsMap:
			out[k] = inversePatch(lm, pm)
		default:
			out[k] = lv
		}
	}
	return out
}

// summarize renders a patch as sorted "path: value" pairs for before/after.
func summarize(m map[string]any) string {
	var parts []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if mm, ok := v.(map[string]any); ok && len(mm) > 0 {
			for k, vv := range mm {
				walk(strings.TrimPrefix(prefix+"."+k, "."), vv)
			}
			return
		}
		parts = append(parts, prefix+": "+compactJSON(v))
	}
	walk("", m)
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// compactJSON is v as JSON with <, > and & as themselves, so markers read as written.
func compactJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

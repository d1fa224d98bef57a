package actions

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// targetKinds are the kinds an action may target, each with the API versions
// (group included) its plans are written for and the resource its rules
// name. A target is matched by group, version and kind: a same-named kind of
// another group (a CRD's Deployment) is not the kind any action plans, and
// the actions' rules name no verb on it, so authorizing it would be vacuous.
var targetKinds = map[string]struct {
	apiVersions []string
	resource    string
}{
	"Deployment":              {[]string{"apps/v1"}, "deployments"},
	"StatefulSet":             {[]string{"apps/v1"}, "statefulsets"},
	"DaemonSet":               {[]string{"apps/v1"}, "daemonsets"},
	"ReplicaSet":              {[]string{"apps/v1"}, "replicasets"},
	"Job":                     {[]string{"batch/v1"}, "jobs"},
	"CronJob":                 {[]string{"batch/v1"}, "cronjobs"},
	"Pod":                     {[]string{"v1"}, "pods"},
	"Node":                    {[]string{"v1"}, "nodes"},
	"ConfigMap":               {[]string{"v1"}, "configmaps"},
	"Service":                 {[]string{"v1"}, "services"},
	"HorizontalPodAutoscaler": {[]string{"autoscaling/v2", "autoscaling/v1"}, "horizontalpodautoscalers"},
}

// TargetResource is the resource an action's rules name for the target's
// kind, and whether the target is one the action supports by group, version
// and kind. Authorization asks for the verbs on this resource.
func TargetResource(a Action, ref v1alpha1.ObjectRef) (schema.GroupVersionResource, error) {
	t, known := targetKinds[ref.Kind]
	if !slices.Contains(a.Kinds(), ref.Kind) || !known {
		return schema.GroupVersionResource{}, invalid("action %s does not support target kind %s (supported: %v)", a.Name(), ref.Kind, a.Kinds())
	}
	if !slices.Contains(t.apiVersions, ref.APIVersion) {
		return schema.GroupVersionResource{}, invalid("action %s supports kind %s only in apiVersion %s, not %q: a kind of the same name in another API group is another kind",
			a.Name(), ref.Kind, strings.Join(t.apiVersions, " or "), ref.APIVersion)
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("parse apiVersion %s: %w", ref.APIVersion, err)
	}
	return gv.WithResource(t.resource), nil
}

package actions

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

type setImage struct{}

func init() { register(setImage{}) }

func (setImage) Name() string { return "set-image" }
func (setImage) Kinds() []string {
	return []string{"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"}
}

func (setImage) Rules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets", "replicasets"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: []string{"get", "patch"}},
	}
}

func (setImage) Validate(req Request) error {
	if req.Params.Container == "" || req.Params.Image == "" {
		return invalid("action set-image needs parameters.container and parameters.image")
	}
	return nil
}

func (setImage) Plan(obj *unstructured.Unstructured, req Request) (Plan, error) {
	path := podSpecPath(obj.GetKind())
	containers, _, err := unstructured.NestedSlice(obj.Object, append(path, "containers")...)
	if err != nil {
		return Plan{}, fmt.Errorf("read containers: %w", err)
	}
	before := ""
	for _, c := range containers {
		m, _ := c.(map[string]any)
		if m["name"] == req.Params.Container {
			before, _ = m["image"].(string)
		}
	}
	if before == "" {
		return Plan{}, invalid("%s %s has no container %q", obj.GetKind(), obj.GetName(), req.Params.Container)
	}
	p := Plan{
		Change: change(obj, "image set", "image: "+before, "image: "+req.Params.Image),
		Rollback: v1alpha1.RollbackInformation{
			Available: true, RollbackAction: "set-image", EstimatedRollbackDuration: "30s",
			RollbackParameters: &v1alpha1.ActionParameters{Container: req.Params.Container, Image: before},
		},
		NoOp: before == req.Params.Image,
	}
	// A strategic merge patch would merge by name, but a merge patch replaces
	// lists, so patch the one container through the full list.
	for i, c := range containers {
		m := c.(map[string]any)
		if m["name"] == req.Params.Container {
			m = copyMap(m)
			m["image"] = req.Params.Image
			containers[i] = m
		}
	}
	body := map[string]any{}
	if err := unstructured.SetNestedSlice(body, containers, append(path, "containers")...); err != nil {
		return Plan{}, fmt.Errorf("build patch: %w", err)
	}
	p.Patch, err = mergePatch(obj, body)
	return p, err
}

// podSpecPath is where a workload kind keeps its pod spec.
func podSpecPath(kind string) []string {
	if kind == "CronJob" {
		return []string{"spec", "jobTemplate", "spec", "template", "spec"}
	}
	return []string{"spec", "template", "spec"}
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

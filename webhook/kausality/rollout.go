package kausality

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// RollingOut reports whether a workload's status shows its controller still
// rolling out a spec it has already observed. A rolling update takes many
// controller passes after status.observedGeneration has caught up (the
// Deployment controller scales the new ReplicaSet up and the old ones down
// as Pods become available), and every one of them is caused by the spec
// change, not drift. Kinds without a rollout status never roll out.
//
// The tests are on replica counts against the spec, not on availability: a
// settled Deployment whose Pod is briefly unavailable (say after a person
// scaled its ReplicaSet) is not rolling out, so the controller putting the
// ReplicaSet back is still drift.
func RollingOut(obj *unstructured.Unstructured) bool {
	if obj == nil || obj.GroupVersionKind().Group != "apps" {
		return false
	}
	status := func(f string) int64 { v, _, _ := unstructured.NestedInt64(obj.Object, "status", f); return v }
	want, ok, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	if !ok {
		want = 1 // the API default
	}
	switch obj.GetKind() {
	case "Deployment":
		// kubectl rollout status: not every replica runs the new template
		// yet, or old replicas are still there.
		return status("updatedReplicas") < want || status("replicas") > status("updatedReplicas")
	case "StatefulSet":
		cur, _, _ := unstructured.NestedString(obj.Object, "status", "currentRevision")
		upd, _, _ := unstructured.NestedString(obj.Object, "status", "updateRevision")
		return upd != "" && cur != upd || status("updatedReplicas") < want
	case "DaemonSet":
		return status("updatedNumberScheduled") < status("desiredNumberScheduled")
	}
	return false
}

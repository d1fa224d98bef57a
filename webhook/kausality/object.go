package kausality

import (
	"reflect"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// specChanged reports whether anything outside metadata and status differs.
// Objects decoded from JSON hold the same Go types on both sides, so
// reflect.DeepEqual is exact.
func specChanged(old, cur *unstructured.Unstructured) bool {
	if old == nil || cur == nil {
		return true
	}
	for k, v := range cur.Object {
		if k == "metadata" || k == "status" {
			continue
		}
		if ov, ok := old.Object[k]; !ok || !reflect.DeepEqual(ov, v) {
			return true
		}
	}
	for k := range old.Object {
		if k == "metadata" || k == "status" {
			continue
		}
		if _, ok := cur.Object[k]; !ok {
			return true
		}
	}
	return false
}

// kausalityAnnotations returns obj's kausality.io/* annotations (never nil).
func kausalityAnnotations(obj *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	if obj == nil {
		return out
	}
	for k, v := range obj.GetAnnotations() {
		if kv1.IsKausality(k) {
			out[k] = v
		}
	}
	return out
}

// asParent describes an object receiving a status update the way the
// adapter describes parents, so the same initialization rules apply.
func asParent(obj *unstructured.Unstructured) Parent {
	p := Parent{
		APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(),
		Name: obj.GetName(), UID: string(obj.GetUID()), Generation: obj.GetGeneration(),
		Annotations: obj.GetAnnotations(), Deleting: obj.GetDeletionTimestamp() != nil,
	}
	if og, ok := ObservedGeneration(obj); ok {
		p.ObservedGeneration = &og
	} else if s, ok := p.Annotations[kv1.AnnotationObservedGeneration]; ok {
		if og, err := strconv.ParseInt(s, 10, 64); err == nil {
			p.ObservedGeneration = &og
		}
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		t, _ := m["type"].(string)
		s, _ := m["status"].(string)
		p.Conditions = append(p.Conditions, Condition{Type: t, Status: s})
	}
	return p
}

// ObservedGeneration reads an object's observedGeneration as kausality
// does: status.observedGeneration, else that of the Synced condition, else
// that of the Ready condition. Crossplane's managed resources report it only
// on their conditions.
func ObservedGeneration(obj *unstructured.Unstructured) (int64, bool) {
	if og, ok, err := unstructured.NestedInt64(obj.Object, "status", "observedGeneration"); ok && err == nil {
		return og, true
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	var ready int64
	found := false
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		og, ok := m["observedGeneration"].(int64)
		if !ok {
			continue
		}
		switch m["type"] {
		case "Synced":
			return og, true
		case "Ready":
			ready, found = og, true
		}
	}
	return ready, found
}

func childRef(obj *unstructured.Unstructured) kv1.ChildRef {
	return kv1.ChildRef{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName()}
}

// describe names an object in messages: "ReplicaSet demo/web-1".
func describe(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}

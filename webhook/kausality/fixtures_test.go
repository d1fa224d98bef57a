package kausality

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"

	"github.com/remedy-dev/remedy/internal/release"
)

// The fixtures: Deployment demo/web (generation 3, observed, Available,
// initialized, controlled by the deployment controller) owns ReplicaSet
// demo/web-1, last changed by that controller.
const (
	dc    = "system:serviceaccount:kube-system:deployment-controller"
	alice = "alice"
	bob   = "bob"
)

var (
	dcHash    = kv1.UserHash(dc, "")
	aliceHash = kv1.UserHash(alice, "")
	bobHash   = kv1.UserHash(bob, "")
	now       = time.Date(2026, 3, 1, 12, 0, 0, 500, time.UTC)
	nowSec    = "2026-03-01T12:00:00Z"
	// parentTrace is the Deployment's origin: alice created it.
	parentTrace = `[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","generation":3,"user":"alice","timestamp":"2026-03-01T11:00:00Z"}]`
)

func ptr[T any](v T) *T { return &v }

func parent() *Parent {
	return &Parent{
		APIVersion: "apps/v1", Kind: "Deployment", Namespace: "demo", Name: "web", UID: "uid-web",
		Generation: 3, ObservedGeneration: ptr(int64(3)),
		Annotations: map[string]string{
			kv1.AnnotationPhase:       kv1.PhaseInitialized,
			kv1.AnnotationControllers: dcHash,
			kv1.AnnotationTrace:       parentTrace,
		},
		Conditions: []Condition{{"Available", "True"}, {"Progressing", "True"}},
	}
}

// rs is ReplicaSet demo/web-1 with replicas and kausality annotations.
func rs(replicas int64, ann map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "ReplicaSet",
		"metadata": map[string]any{"namespace": "demo", "name": "web-1", "generation": int64(2)},
		"spec":     map[string]any{"replicas": replicas, "template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": release.Image()}}}}},
		"status":   map[string]any{"replicas": replicas, "observedGeneration": int64(2)},
	}}
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "uid-web", Controller: ptr(true)}})
	if ann != nil {
		u.SetAnnotations(ann)
	}
	return u
}

// childAnn is what web-1 stores: the controller as its only updater and a
// 2-hop trace.
func childAnn() map[string]string {
	return map[string]string{
		kv1.AnnotationUpdaters: dcHash,
		kv1.AnnotationTrace: `[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","generation":3,"user":"alice","timestamp":"2026-03-01T11:00:00Z"},` +
			`{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","generation":1,"user":"` + dc + `","timestamp":"2026-03-01T11:00:01Z"}]`,
		"deployment.kubernetes.io/revision": "1",
	}
}

// update is the deployment controller scaling web-1 from 1 to 2 replicas
// while the Deployment is unchanged: drift, in log mode by default.
func update() Request {
	return Request{
		Operation: Update, User: User{Name: dc},
		OldObject: rs(1, childAnn()), Object: rs(2, childAnn()),
		Parent: parent(), DefaultMode: kv1.ModeLog, Now: now,
	}
}

func create() Request {
	r := update()
	r.Operation, r.OldObject = Create, nil
	r.Object = rs(1, nil)
	r.Object.SetGeneration(1)
	return r
}

func del() Request {
	r := update()
	r.Operation, r.Object = Delete, nil
	return r
}

func approvals(as ...kv1.Approval) string { return kv1.FormatApprovals(as) }

// hop builds the trace hop Decide writes for web-1 at now.
func hop(user string, gen int64, labels map[string]string) kv1.Hop {
	ts, _ := time.Parse(time.RFC3339, nowSec)
	return kv1.Hop{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", Generation: gen, User: user, Timestamp: ts, Labels: labels}
}

func mustTrace(s string) kv1.Trace {
	t, err := kv1.ParseTrace(s)
	if err != nil {
		panic(err)
	}
	return t
}

package gate

import (
	"container/list"
	"strconv"
	"sync"

	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// Seen keeps, by UID, the last copy of each Remedy subject (a
// KubernetesExecution or RemediationRequest) that the worker read live or
// wrote, bounded (least recently used out). It saves API requests in two
// ways, neither of which trusts a stale copy:
//
//   - A status push starts from the copy and updates with its
//     resourceVersion. The API server refuses the update if anything wrote
//     the object since, so a push that lands checked the run binding and
//     merged against the object as it was at the write, exactly as after a
//     live read; any other outcome is redone from a live read.
//   - A run binding found in a copy holds now: the UID, spec (immutable) and
//     status.runID (set once by the operator) of an object never change, so
//     "this caller is the object's recorded run" stays true. Only a positive
//     check is taken from a copy; anything else is checked again live. The
//     write gate never uses it: its subject check reads live.
//
// Nil keeps nothing.
type Seen struct {
	mu    sync.Mutex
	max   int
	order *list.List // front: most recent; values are seenEntry
	byUID map[string]*list.Element
}

type seenEntry struct {
	uid string
	obj ctrlclient.Object
}

// NewSeen keeps up to max subjects.
func NewSeen(max int) *Seen {
	return &Seen{max: max, order: list.New(), byUID: map[string]*list.Element{}}
}

// Put keeps a copy of obj unless a newer copy of it is kept already (a slow
// read must not replace what a later write returned).
func (s *Seen) Put(obj ctrlclient.Object) {
	if s == nil || obj == nil || obj.GetUID() == "" {
		return
	}
	uid := string(obj.GetUID())
	c := obj.DeepCopyObject().(ctrlclient.Object)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byUID[uid]; ok {
		if older(obj.GetResourceVersion(), e.Value.(seenEntry).obj.GetResourceVersion()) {
			return
		}
		e.Value = seenEntry{uid: uid, obj: c}
		s.order.MoveToFront(e)
		return
	}
	s.byUID[uid] = s.order.PushFront(seenEntry{uid: uid, obj: c})
	for s.order.Len() > s.max {
		last := s.order.Back()
		s.order.Remove(last)
		delete(s.byUID, last.Value.(seenEntry).uid)
	}
}

// Get copies the kept object of uid into into (same type) and reports
// whether there was one.
func (s *Seen) Get(uid string, into ctrlclient.Object) bool {
	if s == nil || uid == "" {
		return false
	}
	s.mu.Lock()
	e, ok := s.byUID[uid]
	if ok {
		s.order.MoveToFront(e)
	}
	s.mu.Unlock()
	if !ok {
		return false
	}
	return copyInto(e.Value.(seenEntry).obj, into)
}

// Forget drops uid's copy.
func (s *Seen) Forget(uid string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byUID[uid]; ok {
		s.order.Remove(e)
		delete(s.byUID, uid)
	}
}

// copyInto deep-copies from into into when both are of the same type.
func copyInto(from, into ctrlclient.Object) bool {
	switch dst := into.(type) {
	case *v1alpha1.KubernetesExecution:
		src, ok := from.(*v1alpha1.KubernetesExecution)
		if ok {
			src.DeepCopyInto(dst)
		}
		return ok
	case *v1alpha1.RemediationRequest:
		src, ok := from.(*v1alpha1.RemediationRequest)
		if ok {
			src.DeepCopyInto(dst)
		}
		return ok
	}
	return false
}

// older reports whether resourceVersion a is older than b; versions that are
// not both integers (they are opaque to clients) never count as older.
func older(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x < y
}

package webhook

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/webhook/kausality"
)

// consumedTTL bounds how long a used `once` approval is hidden from
// decisions while its removal travels to the API server and back to the cache.
const consumedTTL = time.Minute

// parentWrite is one ParentUpdate for one object.
type parentWrite struct {
	ref    metav1.OwnerReference
	ns     string
	update kausality.ParentUpdate
	// specGeneration is the parent's generation of its last spec change,
	// which approvals name (see ParentCache.SpecGeneration).
	specGeneration int64
}

// ParentUpdater writes kausality annotations onto parents in the background
// (recorded controllers, the phase high-water mark, stale approvals), so admission never waits on a second write.
type ParentUpdater struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	ch     chan parentWrite

	mu       sync.Mutex
	consumed map[types.UID][]consumedApproval
}

type consumedApproval struct {
	approval kv1.Approval
	at       time.Time
}

// NewParentUpdater returns an updater holding at most size pending writes.
func NewParentUpdater(dyn dynamic.Interface, mapper meta.RESTMapper, size int) *ParentUpdater {
	return &ParentUpdater{dyn: dyn, mapper: mapper, ch: make(chan parentWrite, size), consumed: map[types.UID][]consumedApproval{}}
}

// Enqueue queues u for the object ref in namespace; a full queue drops it:
// every piece is re-derived by a later request.
func (p *ParentUpdater) Enqueue(ref metav1.OwnerReference, namespace string, specGeneration int64, u kausality.ParentUpdate) {
	select {
	case p.ch <- parentWrite{ref, namespace, u, specGeneration}:
	default:
		metrics.DriftParentUpdates.WithLabelValues("dropped").Inc()
	}
}

// Consumed lists the `once` approvals of parent uid used by this process
// whose removal the cache may not show yet.
func (p *ParentUpdater) Consumed(uid types.UID) []kv1.Approval {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []kv1.Approval
	kept := p.consumed[uid][:0]
	for _, c := range p.consumed[uid] {
		if time.Since(c.at) < consumedTTL {
			kept = append(kept, c)
			out = append(out, c.approval)
		}
	}
	if len(kept) == 0 {
		delete(p.consumed, uid)
	} else {
		p.consumed[uid] = kept
	}
	return out
}

// Run applies queued writes until ctx ends.
func (p *ParentUpdater) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case w := <-p.ch:
			err := p.apply(ctx, w)
			result := "applied"
			if err != nil {
				result = "failed"
				log.FromContext(ctx).Error(err, "update parent annotations", "parent", w.ns+"/"+w.ref.Name, "kind", w.ref.Kind)
			}
			metrics.DriftParentUpdates.WithLabelValues(result).Inc()
		}
	}
}

// apply reads the parent, changes its annotations and writes them back
// pinned to the resourceVersion it read, retrying on conflict.
func (p *ParentUpdater) apply(ctx context.Context, w parentWrite) error {
	ri, err := p.resource(w.ref, w.ns)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := ri.Get(ctx, w.ref.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get parent: %w", err)
		}
		if obj.GetUID() != w.ref.UID || obj.GetDeletionTimestamp() != nil {
			return nil
		}
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		if !applyParentUpdate(ann, w.update, w.specGeneration) {
			return nil
		}
		obj.SetAnnotations(ann)
		if _, err := ri.Update(ctx, obj, metav1.UpdateOptions{FieldManager: "remedy-drift-webhook"}); err != nil {
			return fmt.Errorf("update parent: %w", err)
		}
		return nil
	})
}

// resource is the dynamic client of the object ref names in namespace.
func (p *ParentUpdater) resource(ref metav1.OwnerReference, namespace string) (dynamic.ResourceInterface, error) {
	m, err := restMapping(p.mapper, ref)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return p.dyn.Resource(m.Resource).Namespace(namespace), nil
	}
	return p.dyn.Resource(m.Resource), nil
}

// applyParentUpdate changes ann in place and reports whether it changed.
func applyParentUpdate(ann map[string]string, u kausality.ParentUpdate, generation int64) bool {
	before := fmt.Sprint(ann)
	if u.AddController != "" {
		if hs, added := kv1.AddUserHash(kv1.ParseUserHashes(ann[kv1.AnnotationControllers]), u.AddController); added {
			ann[kv1.AnnotationControllers] = kv1.FormatUserHashes(hs)
		}
	}
	if u.ObservedGeneration != nil {
		ann[kv1.AnnotationObservedGeneration] = strconv.FormatInt(*u.ObservedGeneration, 10)
	}
	if u.Phase == kv1.PhaseInitialized && ann[kv1.AnnotationPhase] != kv1.PhaseInitialized {
		ann[kv1.AnnotationPhase] = kv1.PhaseInitialized
	}
	if u.PruneApprovals {
		approvals, err := kv1.ParseApprovals(ann[kv1.AnnotationApprovals])
		if err == nil {
			kept := slices.DeleteFunc(approvals, func(a kv1.Approval) bool { return a.Stale(generation) })
			if len(kept) == 0 {
				delete(ann, kv1.AnnotationApprovals)
			} else {
				ann[kv1.AnnotationApprovals] = kv1.FormatApprovals(kept)
			}
		}
	}
	return fmt.Sprint(ann) != before
}

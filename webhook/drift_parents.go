package webhook

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/webhook/kausality"
)

// specHashField holds the parent's SpecHash in the trimmed cache copy; the
// spec itself is dropped to keep the cache small.
const specHashField = "remedySpecHash"

// rollingOutField holds kausality.RollingOut of the parent in the trimmed
// cache copy, read before its spec and replica counts are dropped.
const rollingOutField = "remedyRollingOut"

// cacheSyncTimeout bounds the first lookup of a kind, which starts its informer.
const cacheSyncTimeout = 10 * time.Second

// ParentCache answers parent lookups from dynamic informers, one per kind,
// started the first time that kind is asked for, so any GVK works and steady
// state admission makes no API calls.
type ParentCache struct {
	dyn     dynamic.Interface
	mapper  meta.RESTMapper
	factory dynamicinformer.DynamicSharedInformerFactory
	stop    <-chan struct{}

	mu        sync.Mutex
	informers map[schema.GroupVersionResource]cache.SharedIndexInformer
	// specGen remembers, per parent UID, the generation of its last spec
	// change: Deployments bump generation on annotation edits, and writing
	// an approval must not open an "expected change" window.
	specGen map[string]specState
}

type specState struct {
	hash       string
	generation int64
}

// NewParentCache returns a cache whose informers run until stop closes.
func NewParentCache(dyn dynamic.Interface, mapper meta.RESTMapper, stop <-chan struct{}) *ParentCache {
	return &ParentCache{
		dyn: dyn, mapper: mapper, stop: stop,
		factory:   dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0),
		informers: map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		specGen:   map[string]specState{},
	}
}

// DefaultParentKinds are watched from the start, so the generation of each
// parent's first spec change is seen before any annotation edit bumps it.
var DefaultParentKinds = []schema.GroupVersionResource{
	{Group: "apps", Version: "v1", Resource: "deployments"},
	{Group: "apps", Version: "v1", Resource: "replicasets"},
	{Group: "apps", Version: "v1", Resource: "statefulsets"},
	{Group: "apps", Version: "v1", Resource: "daemonsets"},
	{Group: "batch", Version: "v1", Resource: "jobs"},
	{Group: "batch", Version: "v1", Resource: "cronjobs"},
	{Version: "v1", Resource: "namespaces"},
}

// Warm starts and syncs the informers of gvrs.
func (c *ParentCache) Warm(ctx context.Context, gvrs ...schema.GroupVersionResource) error {
	for _, gvr := range gvrs {
		if _, err := c.informer(ctx, gvr); err != nil {
			return err
		}
	}
	return nil
}

// Parent returns the trimmed cached object named by ref in namespace, or nil
// when it no longer exists (or is another object of the same name): a child
// whose parent is gone is left for the garbage collector, not refused.
func (c *ParentCache) Parent(ctx context.Context, ref metav1.OwnerReference, namespace string) (*unstructured.Unstructured, error) {
	m, err := restMapping(c.mapper, ref)
	if err != nil {
		return nil, err
	}
	inf, err := c.informer(ctx, m.Resource)
	if err != nil {
		return nil, err
	}
	key := ref.Name
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		key = namespace + "/" + ref.Name
	}
	item, ok, err := inf.GetIndexer().GetByKey(key)
	if err != nil {
		return nil, fmt.Errorf("read cached %s %s: %w", ref.Kind, key, err)
	}
	if !ok {
		// A parent created a moment ago may not be cached yet: ask once.
		return c.getLive(ctx, m, namespace, ref)
	}
	u := item.(*unstructured.Unstructured)
	if u.GetUID() != ref.UID {
		return nil, nil
	}
	return u, nil
}

// Live reads the parent ref names from the API server, trimmed as the cache
// keeps it; nil when it no longer exists.
func (c *ParentCache) Live(ctx context.Context, ref metav1.OwnerReference, namespace string) (*unstructured.Unstructured, error) {
	m, err := restMapping(c.mapper, ref)
	if err != nil {
		return nil, err
	}
	return c.getLive(ctx, m, namespace, ref)
}

func (c *ParentCache) getLive(ctx context.Context, m *meta.RESTMapping, namespace string, ref metav1.OwnerReference) (*unstructured.Unstructured, error) {
	var ri dynamic.ResourceInterface = c.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = c.dyn.Resource(m.Resource).Namespace(namespace)
	}
	u, err := ri.Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s/%s: %w", ref.Kind, namespace, ref.Name, err)
	}
	if u.GetUID() != ref.UID {
		return nil, nil
	}
	t, err := trimParent(u)
	if err != nil {
		return nil, err
	}
	return t.(*unstructured.Unstructured), nil
}

// SpecGeneration is the generation of p's last spec change as far as this
// process has seen; p must come from Parent.
func (c *ParentCache) SpecGeneration(p *unstructured.Unstructured) int64 {
	hash, _, _ := unstructured.NestedString(p.Object, specHashField)
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.specGen[string(p.GetUID())]
	if !ok || s.hash != hash || s.generation > p.GetGeneration() {
		s = specState{hash: hash, generation: p.GetGeneration()}
		c.specGen[string(p.GetUID())] = s
	}
	return s.generation
}

// SpecHash is the parent's spec hash recorded by the cache.
func SpecHash(p *unstructured.Unstructured) string {
	h, _, _ := unstructured.NestedString(p.Object, specHashField)
	return h
}

// NamespaceMode is the kausality.io/mode annotation of namespace, "" if none.
func (c *ParentCache) NamespaceMode(ctx context.Context, namespace string) (string, error) {
	ns, err := c.namespace(ctx, namespace)
	if ns == nil {
		return "", err
	}
	return ns.GetAnnotations()[kv1.AnnotationMode], nil
}

// NamespaceLabels are the labels of namespace, for policies' namespace selectors.
func (c *ParentCache) NamespaceLabels(ctx context.Context, namespace string) (map[string]string, error) {
	ns, err := c.namespace(ctx, namespace)
	if ns == nil {
		return nil, err
	}
	return ns.GetLabels(), nil
}

// namespace is the cached namespace, nil if none (or for cluster scope).
func (c *ParentCache) namespace(ctx context.Context, namespace string) (*unstructured.Unstructured, error) {
	if namespace == "" {
		return nil, nil
	}
	inf, err := c.informer(ctx, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	if err != nil {
		return nil, err
	}
	item, ok, err := inf.GetIndexer().GetByKey(namespace)
	if err != nil || !ok {
		return nil, err
	}
	return item.(*unstructured.Unstructured), nil
}

// informer returns the synced informer of gvr, starting it on first use.
func (c *ParentCache) informer(ctx context.Context, gvr schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	c.mu.Lock()
	inf, ok := c.informers[gvr]
	if !ok {
		inf = c.factory.ForResource(gvr).Informer()
		if err := inf.SetTransform(trimParent); err != nil {
			c.mu.Unlock()
			return nil, fmt.Errorf("set transform of %s: %w", gvr, err)
		}
		// Seeing every spec change keeps SpecGeneration exact even for
		// parents no admission request asked about in between.
		observe := func(obj any) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				c.SpecGeneration(u)
			}
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { observe(obj) },
			UpdateFunc: func(_, obj any) { observe(obj) },
			DeleteFunc: func(obj any) {
				if u, ok := obj.(*unstructured.Unstructured); ok {
					c.mu.Lock()
					delete(c.specGen, string(u.GetUID()))
					c.mu.Unlock()
				}
			},
		}); err != nil {
			c.mu.Unlock()
			return nil, fmt.Errorf("watch %s: %w", gvr, err)
		}
		c.informers[gvr] = inf
		go inf.Run(c.stop)
	}
	c.mu.Unlock()
	if inf.HasSynced() {
		return inf, nil
	}
	ctx, cancel := context.WithTimeout(ctx, cacheSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("sync cache of %s: timed out", gvr)
	}
	return inf, nil
}

// restMapping maps the kind an owner reference names to its resource.
func restMapping(mapper meta.RESTMapper, ref metav1.OwnerReference) (*meta.RESTMapping, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("parse apiVersion %q: %w", ref.APIVersion, err)
	}
	m, err := mapper.RESTMapping(gv.WithKind(ref.Kind).GroupKind(), gv.Version)
	if err != nil {
		return nil, fmt.Errorf("map kind %s: %w", ref.Kind, err)
	}
	return m, nil
}

// trimParent keeps what the decision reads: metadata without managedFields,
// status.observedGeneration and status.conditions, plus the spec's hash and
// whether the parent is rolling out.
func trimParent(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	meta, _, _ := unstructured.NestedMap(u.Object, "metadata")
	delete(meta, "managedFields")
	out := map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "metadata": meta, specHashField: kv1.SpecHash(u.Object)}
	if kausality.RollingOut(u) {
		out[rollingOutField] = true
	}
	status := map[string]any{}
	if og, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "observedGeneration"); ok {
		status["observedGeneration"] = og
	}
	if conds, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "conditions"); ok {
		status["conditions"] = conds
	}
	if len(status) > 0 {
		out["status"] = status
	}
	return &unstructured.Unstructured{Object: out}, nil
}

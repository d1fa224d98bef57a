package worker

import (
	"fmt"
	"sync"
	"time"

	sdkworker "go.temporal.io/sdk/worker"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// watchedWorker starts the worker's watches before it polls, so the first
// activity finds them synced, and stops them after it.
type watchedWorker struct {
	sdkworker.Worker
	factories []informers.SharedInformerFactory
	// policies is the policy ConfigMaps' informer; policyChanged runs on
	// each of their changes once the watches have synced.
	policies      cache.SharedIndexInformer
	policyChanged func()
	// background runs beside the worker until it stops.
	background []func(stop <-chan struct{})
	stop       chan struct{}
	stopOnce   sync.Once
	// activities are the registered activity types (ActivityTypes).
	activities []string
}

// policyWatches watches namespaces, and the policy ConfigMaps and the action
// ServiceAccounts of the action namespace (the worker's role may list and
// watch them): validation reads them for every run.
func policyWatches(cs kubernetes.Interface, actionNamespace string) (*gate.PolicyReads, cache.SharedIndexInformer, []informers.SharedInformerFactory) {
	all := informers.NewSharedInformerFactory(cs, 0)
	own := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(actionNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = v1alpha1.PolicyLabel + "=true" }))
	accounts := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(actionNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = v1alpha1.ActionLabel }))
	reads := &gate.PolicyReads{
		Namespaces: all.Core().V1().Namespaces().Lister(),
		Policies:   own.Core().V1().ConfigMaps().Lister().ConfigMaps(actionNamespace),
		Accounts:   accounts.Core().V1().ServiceAccounts().Lister().ServiceAccounts(actionNamespace),
	}
	return reads, own.Core().V1().ConfigMaps().Informer(), []informers.SharedInformerFactory{all, own, accounts}
}

// syncTimeout bounds the wait for the watches' first list.
const syncTimeout = time.Minute

func (w *watchedWorker) Start() error {
	if err := w.startWatches(); err != nil {
		return err
	}
	return w.Worker.Start()
}

func (w *watchedWorker) Run(interruptCh <-chan any) error {
	if err := w.startWatches(); err != nil {
		return err
	}
	defer w.stopWatches()
	return w.Worker.Run(interruptCh)
}

func (w *watchedWorker) Stop() {
	w.Worker.Stop()
	w.stopWatches()
}

func (w *watchedWorker) stopWatches() { w.stopOnce.Do(func() { close(w.stop) }) }

func (w *watchedWorker) startWatches() error {
	expired := make(chan struct{})
	timer := time.AfterFunc(syncTimeout, func() { close(expired) })
	defer timer.Stop()
	for _, f := range w.factories {
		f.Start(w.stop)
		for typ, ok := range f.WaitForCacheSync(expired) {
			if !ok {
				return fmt.Errorf("sync the watch of %v within %s", typ, syncTimeout)
			}
		}
	}
	for _, run := range w.background {
		go run(w.stop)
	}
	if w.policies != nil && w.policyChanged != nil {
		// Registered once synced: every call then sees all the policy
		// ConfigMaps, never a part of them that happens to compile.
		changed := func(any) { w.policyChanged() }
		if _, err := w.policies.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: changed, UpdateFunc: func(_, o any) { changed(o) }, DeleteFunc: changed,
		}); err != nil {
			return fmt.Errorf("watch policy changes: %w", err)
		}
	}
	return nil
}

// Package worker builds the Temporal worker: the only place that constructs
// activity structs and registers workflows.
package worker

import (
	"fmt"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/remedy-dev/remedy/activities"
	"github.com/remedy-dev/remedy/workflows"
)

// Options configure a worker.
type Options struct {
	// Temporal is the client the worker polls with.
	Temporal client.Client
	// Kube is the worker's own identity; it only needs to impersonate the action ServiceAccounts.
	Kube *rest.Config
	// ActionNamespace holds the remedy-action-<action> ServiceAccounts.
	ActionNamespace string
}

// New returns a worker on the remedy task queue with every workflow and activity registered.
func New(o Options) (sdkworker.Worker, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(o.Kube)
	if err != nil {
		return nil, fmt.Errorf("build discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	w := sdkworker.New(o.Temporal, workflows.TaskQueue, sdkworker.Options{})
	workflows.RegisterAll(w)
	w.RegisterActivity(&activities.Execution{Config: o.Kube, ActionNamespace: o.ActionNamespace, Mapper: mapper})
	return w, nil
}

// Package worker builds the Temporal worker: the only place that constructs
// activity structs and registers workflows.
package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/remedy-dev/remedy/activities/alerts"
	"github.com/remedy-dev/remedy/activities/approval"
	"github.com/remedy-dev/remedy/activities/drift"
	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/activities/reload"
	"github.com/remedy-dev/remedy/activities/status"
	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/policy"
	"github.com/remedy-dev/remedy/internal/release"
	"github.com/remedy-dev/remedy/internal/seal"
	"github.com/remedy-dev/remedy/workflows"
)

// Options configure a worker.
type Options struct {
	// Temporal is the client the worker polls with.
	Temporal client.Client
	// Kube is the worker's own identity. It writes targets only by
	// impersonating the remedy-action-<action>, remedy-reload and remedy-drift ServiceAccounts.
	Kube *rest.Config
	// ActionNamespace holds the remedy-action-<action>, remedy-reload and remedy-drift ServiceAccounts.
	ActionNamespace string
	// ExecImage runs `remedy exec` in the job executor's pods (default DefaultExecImage).
	ExecImage string
	// MaxConcurrentActivities, MaxConcurrentLocalActivities and
	// MaxConcurrentWorkflowTasks bound what the worker runs at once (0: the
	// Temporal SDK's default, 1000 each).
	MaxConcurrentActivities      int
	MaxConcurrentLocalActivities int
	MaxConcurrentWorkflowTasks   int
	// StopTimeout is how long Stop lets in-flight activities finish before
	// cancelling them (0: at once). A cancelled write stops heartbeating, so the
	// server retries it on another worker within its heartbeat timeout.
	StopTimeout time.Duration
	// JobTTL is how long the job executor's finished Jobs stay (default execution.DefaultJobTTL).
	JobTTL time.Duration
	// DriftCallbackURLs receive every drift's DriftReports, and DriftApproval
	// asks a person about every drift, besides what Kausality policies'
	// reporting says for the parent's namespace.
	DriftCallbackURLs []string
	DriftApproval     bool
	// AlertmanagerURL is the Alertmanager alert runs verify their alert
	// against and sweep for lost resolves (empty: no check, no sweep).
	AlertmanagerURL string
	// AlertmanagerRestartGrace after Alertmanager starts before its list may
	// prove an alert resolved (0: alertmanager.RestartGrace).
	AlertmanagerRestartGrace time.Duration
	// AlertmanagerHTTPConfigFile holds the basic-auth credentials it is read
	// with (amtool's --http.config.file format); required with AlertmanagerURL.
	AlertmanagerHTTPConfigFile string
	// PayloadKeys are the keys Temporal's client seals with (internal/seal):
	// the worker refuses a signal not sealed under them before the workflow
	// sees it. Required. PayloadUnsealedBefore is the migration's cutoff.
	PayloadKeys           *seal.Keyring
	PayloadUnsealedBefore time.Time
	// ExecGate serves the job executor's Pods, which ask it immediately before their write.
	ExecGate ExecGateOptions
}

// DefaultExecImage is the released image of this binary.
var DefaultExecImage = release.Image()

// DefaultStopTimeout of `remedy worker`: under the 30s a pod gets by default
// between SIGTERM and SIGKILL.
const DefaultStopTimeout = 20 * time.Second

// seenSubjects bounds the subjects the worker keeps (gate.Seen): up to
// some KiB each, and a run needs its own only while it runs.
const seenSubjects = 1024

// New returns a worker on the remedy task queue with every workflow and activity registered.
func New(o Options) (sdkworker.Worker, error) {
	if o.PayloadKeys == nil {
		return nil, errors.New("no payload keys: the worker accepts only payloads sealed by Remedy's parts (--payload-keys)")
	}
	c, err := newClients(o.Kube)
	if err != nil {
		return nil, err
	}
	// Signals a workflow cannot use become Warning Events on its object.
	signalEvents := status.NewSignalEvents(c.cs, ctrllog.Log.WithName("signals"))
	w := &registered{Worker: sdkworker.New(o.Temporal, workflows.TaskQueue, sdkworker.Options{
		Interceptors: []interceptor.WorkerInterceptor{&workflows.UnknownSignals{Warner: signalEvents,
			Sealed: &seal.Signals{Keys: o.PayloadKeys, UnsealedBefore: o.PayloadUnsealedBefore}}},
		MaxConcurrentActivityExecutionSize:      o.MaxConcurrentActivities,
		MaxConcurrentLocalActivityExecutionSize: o.MaxConcurrentLocalActivities,
		MaxConcurrentWorkflowTaskExecutionSize:  o.MaxConcurrentWorkflowTasks,
		WorkerStopTimeout:                       o.StopTimeout,
	})}
	workflows.RegisterAll(w)
	built, err := registerActivities(w, o, c)
	if err != nil {
		return nil, err
	}
	background := []func(stop <-chan struct{}){signalEvents.Run}
	if o.ExecGate.Addr != "" || o.ExecGate.Listener != nil {
		serve, err := serveExecGate(built.execGate, o.ExecGate)
		if err != nil {
			return nil, err
		}
		background = append(background, serve)
	}
	return &watchedWorker{Worker: w.Worker, activities: w.activities, factories: built.watches, stop: make(chan struct{}),
		policies: built.policies, policyChanged: func() { gate.ObservePolicy(context.Background(), built.validation) },
		background: background}, nil
}

// clients are the worker's own API clients; the gate builds the ones that impersonate.
type clients struct {
	cs     kubernetes.Interface
	dyn    dynamic.Interface
	kc     ctrlclient.Client
	mapper meta.RESTMapper
}

func newClients(cfg *rest.Config) (clients, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return clients{}, fmt.Errorf("build discovery client: %w", err)
	}
	c := clients{mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
	if c.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return clients{}, fmt.Errorf("build clientset: %w", err)
	}
	if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return clients{}, fmt.Errorf("build dynamic client: %w", err)
	}
	if c.kc, err = ctrlclient.New(cfg, ctrlclient.Options{Scheme: scheme()}); err != nil {
		return clients{}, fmt.Errorf("build client: %w", err)
	}
	return c, nil
}

// built is what New needs of the activities it registered: the policy
// watches, and the exec gate it may serve.
type built struct {
	validation *gate.Validation
	execGate   *execution.ExecGate
	watches    []informers.SharedInformerFactory
	policies   cache.SharedIndexInformer
}

// registerActivities builds every activity struct, the only place that
// does, around the one write gate, and registers them.
func registerActivities(w *registered, o Options, c clients) (built, error) {
	reads, policies, watches := policyWatches(c.cs, o.ActionNamespace)
	validation := &gate.Validation{
		Kube: c.cs, Dynamic: c.dyn, Mapper: c.mapper, ActionNamespace: o.ActionNamespace, Policy: policy.NewEngine(), Reads: reads,
		LastGood: &gate.LastGoodPolicy{Events: c.cs, Log: ctrllog.Log.WithName("policy")},
	}
	w.RegisterActivity(validation)
	// Seen keeps the subjects this worker last read or wrote, so a run's
	// status pushes and bound reads need not read them again (subject_seen.go).
	seen := gate.NewSeen(seenSubjects)
	subjects := &gate.Subjects{Client: c.kc, Seen: seen}
	runReads := &gate.RunReads{Subjects: subjects}
	validation.Runs = runReads
	// The one write gate: every activity that writes what Remedy does not own gets its client from it.
	driftConfig := &gate.DriftConfig{Reader: c.kc, CallbackURLs: o.DriftCallbackURLs, RequestApproval: o.DriftApproval}
	// Reload, drift and alert runs record no run ID: they are bound to the open run of their workflow ID.
	openRuns := &gate.OpenRuns{Temporal: o.Temporal, TaskQueue: workflows.TaskQueue}
	writeGate := &gate.Gate{Config: o.Kube, ActionNamespace: o.ActionNamespace, Subjects: c.kc, Seen: seen, Checks: validation,
		Callbacks: &http.Client{Timeout: 10 * time.Second}, Drift: driftConfig, Runs: openRuns}
	w.RegisterActivity(&execution.Execution{Gate: writeGate, Mapper: c.mapper, Heartbeats: o.Temporal, Runs: runReads})
	if o.ExecImage == "" {
		o.ExecImage = DefaultExecImage
	}
	execGate := &execution.ExecGate{Client: c.cs, Namespace: o.ActionNamespace, URL: o.ExecGate.URL, CA: o.ExecGate.CA}
	w.RegisterActivity(&execution.Jobs{Client: c.cs, Namespace: o.ActionNamespace, Image: o.ExecImage, Heartbeats: o.Temporal, TTL: o.JobTTL,
		Gate: writeGate, ExecGate: execGate})
	w.RegisterActivity(&execution.Remediation{Client: c.kc})
	statuses := &status.Statuses{Client: c.kc, Kube: c.cs, Seen: seen}
	w.RegisterActivity(statuses)
	alerting := &alerts.Alerts{Client: c.kc, Events: statuses, Guard: o.Temporal, TaskQueue: workflows.TaskQueue, Runs: openRuns,
		RestartGrace: o.AlertmanagerRestartGrace}
	if o.AlertmanagerURL != "" {
		am, err := alertmanager.New(o.AlertmanagerURL, o.AlertmanagerHTTPConfigFile)
		if err != nil {
			return built{}, err
		}
		alerting.Alertmanager = am
	}
	// Silences are writes outside the cluster: only the gate posts them.
	alerting.Gate, writeGate.Alertmanager = writeGate, alerting.Alertmanager
	runReads.Permits = alerts.Permits(alerting)
	w.RegisterActivity(alerting)
	w.RegisterActivity(&alerts.Guards{Temporal: o.Temporal, TaskQueue: workflows.TaskQueue, Client: c.kc})
	w.RegisterActivity(subjects)
	w.RegisterActivity(&approval.Approvals{Client: c.kc, Runs: openRuns})
	w.RegisterActivity(&reload.Reload{Gate: writeGate, Events: c.cs, Namespaces: c.cs})
	w.RegisterActivity(&drift.Drift{Dynamic: c.dyn, Gate: writeGate, Config: driftConfig, Mapper: c.mapper})
	return built{validation: validation, execGate: execGate, watches: watches, policies: policies}, nil
}

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	// Core types too: the approval activities read the namespace's remedy-config ConfigMap.
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	// Kausality policies say where drifts are reported.
	if err := kv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

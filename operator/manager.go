// Package operator runs the controller-runtime manager and Remedy's
// reconcilers. Reconcilers start workflows, signal them and mirror their
// status; they never do a workflow's job.
package operator

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/authz"
)

// Options configure the manager.
type Options struct {
	Temporal client.Client
	// MetricsAddr serves /metrics; "0" disables it.
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz; "" or "0" disables it.
	ProbeAddr string
	// LeaderElection makes one replica active; the lease lives in LeaderElectionNamespace.
	LeaderElection          bool
	LeaderElectionNamespace string
	// WebhookServer, when set, is the TLS server the manager runs for the
	// admission webhooks its composer registers; /readyz waits for it.
	WebhookServer webhook.Server
	// MaxConcurrentReconciles is each controller's number of reconcile
	// workers (0: DefaultMaxConcurrentReconciles).
	MaxConcurrentReconciles int
	// WorkflowCheckInterval is how long a run that pushes its status may stay
	// quiet before the operator looks at its workflow, and how often a request
	// past requiredBy whose workflow still runs is looked at again
	// (0: DefaultWorkflowCheckInterval).
	WorkflowCheckInterval time.Duration
	// MaxOpenRunsPerNamespace caps the KubernetesExecutions and
	// RemediationRequests open at once in one namespace; more wait Pending
	// with reason OpenRunsLimited (0: no cap).
	MaxOpenRunsPerNamespace int
	// FinishedTTL is how long a finished KubernetesExecution,
	// RemediationRequest or decided RemediationApprovalRequest whose spec
	// sets no ttlSecondsAfterFinished stays before the operator deletes it
	// (0: keep them; --ttl-after-finished).
	FinishedTTL time.Duration
	// SkipNameValidation lets one process build the operator more than once,
	// as tests that stop and start it do.
	SkipNameValidation bool
}

// DefaultMaxConcurrentReconciles lets a slow reconcile (a Temporal start or
// signal) not hold up the others; workflows write status themselves, so
// reconciles are few.
const DefaultMaxConcurrentReconciles = 4

// Scheme knows the built-in types and Remedy's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilMust(clientgoscheme.AddToScheme(s))
	utilMust(v1alpha1.AddToScheme(s))
	return s
}

func utilMust(err error) {
	if err != nil {
		panic(err)
	}
}

// New builds a manager with every reconciler registered.
func New(cfg *rest.Config, o Options) (manager.Manager, error) {
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	mgr, err := ctrl.NewManager(countConfigMapWatches(cfg), ctrl.Options{
		Controller:              ctrlconfig.Controller{MaxConcurrentReconciles: o.MaxConcurrentReconciles, SkipNameValidation: &o.SkipNameValidation},
		Cache:                   CacheOptions(),
		WebhookServer:           o.WebhookServer,
		Scheme:                  Scheme(),
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.ProbeAddr,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        "remedy-operator.remedy.dev",
		LeaderElectionNamespace: o.LeaderElectionNamespace,
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	kexec, rr, err := addReconcilers(mgr, cfg, o)
	if err != nil {
		return nil, err
	}
	if err := setupCleanup(mgr, o.Temporal, o.FinishedTTL, o.WorkflowCheckInterval); err != nil {
		return nil, err
	}
	sweep := &runSweep{client: mgr.GetClient(), temporal: o.Temporal, clock: clock.RealClock{},
		every: checkInterval(o.WorkflowCheckInterval), kexec: kexec.swept, rr: rr.swept}
	if err := mgr.Add(sweep); err != nil {
		return nil, fmt.Errorf("add workflow sweep: %w", err)
	}
	if err := addProbes(mgr, o.WebhookServer != nil); err != nil {
		return nil, err
	}
	if err := mgr.Add(leaderMetrics{}); err != nil {
		return nil, fmt.Errorf("add leader metrics: %w", err)
	}
	return mgr, nil
}

// addReconcilers registers one reconciler per kind; the execution and
// remediation reconcilers are returned for the sweep that wakes them.
func addReconcilers(mgr manager.Manager, cfg *rest.Config, o Options) (*ExecutionReconciler, *RemediationReconciler, error) {
	open := newOpenRuns(o.MaxOpenRunsPerNamespace, mgr.GetClient())
	kexec := &ExecutionReconciler{
		Client:   mgr.GetClient(),
		Temporal: o.Temporal,
		Recorder: mgr.GetEventRecorder("remedy-operator"),
		Clock:    clock.RealClock{},
		openRuns: open,
	}
	if err := kexec.SetupWithManager(mgr); err != nil {
		return nil, nil, fmt.Errorf("set up KubernetesExecution reconciler: %w", err)
	}
	rr := &RemediationReconciler{
		Client:   mgr.GetClient(),
		Temporal: o.Temporal,
		Recorder: mgr.GetEventRecorder("remedy-operator"),
		Clock:    clock.RealClock{},
		openRuns: open,
	}
	if err := rr.SetupWithManager(mgr); err != nil {
		return nil, nil, fmt.Errorf("set up RemediationRequest reconciler: %w", err)
	}
	rar := &ApprovalReconciler{
		Client:        mgr.GetClient(),
		Temporal:      o.Temporal,
		Recorder:      mgr.GetEventRecorder("remedy-operator"),
		Clock:         clock.RealClock{},
		CheckInterval: o.WorkflowCheckInterval,
	}
	if err := rar.SetupWithManager(mgr); err != nil {
		return nil, nil, fmt.Errorf("set up RemediationApprovalRequest reconciler: %w", err)
	}
	reload := &ReloadReconciler{
		Client:   mgr.GetClient(),
		Live:     mgr.GetAPIReader(),
		Temporal: o.Temporal,
		Recorder: mgr.GetEventRecorder("remedy-operator"),
		Clock:    clock.RealClock{},
	}
	if err := reload.SetupWithManager(mgr); err != nil {
		return nil, nil, fmt.Errorf("set up ConfigReloadPolicy reconciler: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("build clientset: %w", err)
	}
	review, mapper := authz.SARReview(cs.AuthorizationV1().SubjectAccessReviews()), mgr.GetRESTMapper()
	rules := &RuleReconciler{Client: mgr.GetClient(),
		Authorize: func(ctx context.Context, r authz.Request) error { return authz.Authorize(ctx, review, mapper, r) }}
	if err := rules.SetupWithManager(mgr); err != nil {
		return nil, nil, fmt.Errorf("set up RemediationRule reconciler: %w", err)
	}
	return kexec, rr, nil
}

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/alerts"
	"github.com/remedy-dev/remedy/internal/cli"
	"github.com/remedy-dev/remedy/internal/compose"
	"github.com/remedy-dev/remedy/internal/webhookauth"
	"github.com/remedy-dev/remedy/operator"
	"github.com/remedy-dev/remedy/operator/admission"
	"github.com/remedy-dev/remedy/worker"
)

func runOperator(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("operator", flag.ContinueOnError)
	var tf temporalFlags
	tf.register(fs)
	metrics := fs.String("metrics-addr", ":8080", "address of /metrics (0 disables)")
	probes := fs.String("probe-addr", ":8081", "address of /healthz and /readyz")
	leader := fs.Bool("leader-elect", true, "elect one active replica")
	leaseNS := fs.String("leader-election-namespace", "remedy-system", "namespace of the leader lease")
	webhookPort := fs.Int("webhook-port", 9443, "port of the TLS admission webhook (0 disables it)")
	webhookCerts := fs.String("webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory with tls.crt and tls.key for the webhook")
	clients := clientAuthFlags(fs)
	workerSA := fs.String("worker-user", "system:serviceaccount:remedy-system:remedy-worker", "username of the worker, whose recorded approval decisions keep their attribution")
	operatorSA := fs.String("operator-user", "system:serviceaccount:remedy-system:remedy-operator", "username of the operator, which may expire an approval request past requiredBy whose workflow is gone")
	policyNS := fs.String("policy-namespace", "remedy-system", "namespace of the safety policy's ConfigMaps (the worker's --action-namespace), whose admission compiles the policy")
	checkEvery := fs.Duration("workflow-check-interval", operator.DefaultWorkflowCheckInterval, "how often the operator lists running workflows to find quiet runs whose workflow is gone (one paged ListWorkflowExecutions per interval), and how long a run must be quiet to count")
	reconciles := fs.Int("max-concurrent-reconciles", operator.DefaultMaxConcurrentReconciles, "reconcile workers per controller")
	maxOpen := fs.Int("max-open-runs-per-namespace", operator.DefaultMaxOpenRunsPerNamespace, "KubernetesExecutions and RemediationRequests open at once in one namespace; more wait Pending with reason OpenRunsLimited (0: no cap)")
	codec := codecFlags(fs)
	finishedTTL := fs.Duration("ttl-after-finished", 0, "how long a finished KubernetesExecution, RemediationRequest or decided RemediationApprovalRequest stays before the operator deletes it, unless its spec.ttlSecondsAfterFinished says otherwise (0: keep them); Temporal keeps the run's history for its namespace's retention")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New())
	tc, cfg, err := tf.connect()
	if err != nil {
		return err
	}
	defer tc.Close()
	if err := serveCodec(ctx, cfg, tf.keys, codec); err != nil {
		return err
	}
	mgr, err := compose.Operator(cfg, operator.Options{
		Temporal: tc, MetricsAddr: *metrics, ProbeAddr: *probes,
		LeaderElection: *leader, LeaderElectionNamespace: *leaseNS,
		MaxConcurrentReconciles: *reconciles,
		WorkflowCheckInterval:   *checkEvery,
		MaxOpenRunsPerNamespace: *maxOpen,
		FinishedTTL:             *finishedTTL,
	}, webhookOptions(*webhookPort, *webhookCerts, *clients, *workerSA, *operatorSA, *policyNS))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

func runWorker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	var tf temporalFlags
	tf.register(fs)
	actionNS := fs.String("action-namespace", "remedy-system", "namespace of the remedy-action-<action> ServiceAccounts")
	execImage := fs.String("exec-image", worker.DefaultExecImage, "image of the job executor's remedy exec pods")
	metricsAddr := fs.String("metrics-addr", ":8083", "address of /metrics (0 disables)")
	maxActivities := fs.Int("max-concurrent-activities", 0, "activities run at once (0: Temporal SDK default, 1000)")
	localActivities := fs.Int("max-concurrent-local-activities", 0, "local activities (status writes) run at once (0: Temporal SDK default, 1000)")
	workflowTasks := fs.Int("max-concurrent-workflow-tasks", 0, "workflow tasks run at once (0: Temporal SDK default, 1000)")
	stopTimeout := fs.Duration("stop-timeout", worker.DefaultStopTimeout, "on SIGTERM, how long in-flight activities may finish before they are cancelled and retried elsewhere; keep it below the pod's terminationGracePeriodSeconds")
	jobTTL := fs.Duration("job-ttl", execution.DefaultJobTTL, "ttlSecondsAfterFinished of the job executor's Jobs: how long a finished Job stays for a worker to read its result")
	callbacks, approval, checkCallbacks := cli.DriftReportingFlags(fs)
	var ao compose.AlertsOptions
	fs.StringVar(&ao.Addr, "alerts-addr", "0", "address of the Alertmanager webhook receiver, path "+alerts.Path+" (0 disables)")
	fs.StringVar(&ao.TokenFile, "alerts-token-file", "", "file holding the bearer token Alertmanager sends (http_config.authorization); read on each request")
	fs.StringVar(&ao.CertFile, "alerts-tls-cert", "", "serving certificate of the receiver (empty: plain HTTP)")
	fs.StringVar(&ao.KeyFile, "alerts-tls-key", "", "serving key of the receiver")
	fs.StringVar(&ao.ClientCAFile, "alerts-client-ca", "", "CA whose client certificates the receiver admits (with TLS)")
	fs.Int64Var(&ao.MaxBodyBytes, "alerts-max-body-bytes", alerts.DefaultMaxBodyBytes, "largest notification body accepted (413 above)")
	fs.DurationVar(&ao.MaxAge, "alerts-max-age", alerts.DefaultMaxAge, "a firing alert whose startsAt is older is refused as stale")
	fs.DurationVar(&ao.SweepEvery, "alerts-sweep-every", time.Minute, "how often the receiver lists Alertmanager's active alerts and resolves open alert runs whose alert it no longer holds (lost resolves)")
	fs.DurationVar(&ao.SweepGrace, "alerts-sweep-grace", alerts.DefaultSweepGrace, "after Alertmanager (re)starts, how long the sweep resolves nothing and no alert run reads a missing alert as resolved (verify, holdFor): it keeps no alerts across a restart, and its senders send firing alerts again only every resend delay")
	amURL := fs.String("alertmanager-url", "", "Alertmanager that alert runs verify their alert against and sweep (empty: no check)")
	amAuth := fs.String("alertmanager-http-config-file", "", "basic_auth credentials for --alertmanager-url, in amtool's --http.config.file format (required with it: Remedy acts only on an Alertmanager with web authentication); read on each request")
	var gf execGateFlags
	gf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	execGate, err := gf.options()
	if err != nil {
		return err
	}
	if err := checkCallbacks(); err != nil {
		return err
	}
	stopMetrics, err := cli.ServeMetrics(*metricsAddr)
	if err != nil {
		return err
	}
	defer stopMetrics()
	tc, cfg, err := tf.connect()
	if err != nil {
		return err
	}
	defer tc.Close()
	w, err := worker.New(worker.Options{Temporal: tc, Kube: cfg, ActionNamespace: *actionNS, ExecImage: *execImage,
		PayloadKeys: tf.keys, PayloadUnsealedBefore: tf.cutoff,
		MaxConcurrentActivities: *maxActivities, MaxConcurrentLocalActivities: *localActivities, MaxConcurrentWorkflowTasks: *workflowTasks,
		StopTimeout: *stopTimeout, JobTTL: *jobTTL, DriftCallbackURLs: *callbacks, DriftApproval: *approval, AlertmanagerURL: *amURL,
		AlertmanagerHTTPConfigFile: *amAuth, AlertmanagerRestartGrace: ao.SweepGrace, ExecGate: execGate})
	if err != nil {
		return err
	}
	if ao.Addr != "0" {
		ao.AlertmanagerURL, ao.AlertmanagerHTTPConfigFile = *amURL, *amAuth
		url, err := compose.ServeAlerts(ctx, cfg, tc, tc, ao)
		if err != nil {
			return err
		}
		ctrl.Log.Info("serving the Alertmanager receiver", "url", url)
	}
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	<-ctx.Done()
	w.Stop()
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func webhookOptions(port int, certDir string, clients webhookauth.ClientAuth, workerUser, operatorUser, policyNamespace string) *admission.OperatorOptions {
	if port == 0 {
		return nil
	}
	return &admission.OperatorOptions{Port: port, CertDir: certDir, ClientAuth: clients, TrustedRecorders: []string{workerUser}, WorkerUser: workerUser,
		OperatorUser: operatorUser, PolicyNamespace: policyNamespace}
}

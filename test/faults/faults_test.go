package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/test/procs"
)

// The points at which a process is killed.
const (
	pointApproval = "approval wait, decided while down"
	pointInline   = "inline write (landed, unreported)"
	pointJob      = "Job monitoring, down past the Job's TTL"
	pointReload   = "reload debounce window"
	pointDrift    = "drift workflow open"
	pointRR       = "RemediationRequest between steps"
	pointSaga     = "RemediationRequest mid-compensation"
	pointReceipt  = "alert received, workflow not started"
	pointFlap     = "flapping alert between runs"
	pointVerify   = "alert run verifying its fix"
)

var points = []string{pointApproval, pointInline, pointJob, pointReload, pointDrift, pointRR, pointSaga, pointReceipt, pointFlap, pointVerify}

// The processes and parts a case kills.
const (
	worker    = "worker"
	operator  = "operator"
	webhook   = "webhook"
	temporal  = "temporal"
	apiserver = "kube-apiserver"
)

var processes = []string{worker, operator, webhook, temporal, apiserver}

// notApplicable are the pairs with no case, and why.
var notApplicable = map[[2]string]string{
	{webhook, pointApproval}: "n/a: the drift webhook admits nothing of an approval (RARs, KubernetesExecutions)",
	{webhook, pointInline}:   "n/a: failurePolicy Ignore: the write is admitted untraced; nothing of the run waits on the webhook",
	{webhook, pointJob}:      "n/a: nothing of a Job's run passes the drift webhook but untraced admission (failurePolicy Ignore)",
	{webhook, pointReload}:   "n/a: the debounce lives in the reload workflow; the webhook only traces the rollout (Ignore)",
	{webhook, pointRR}:       "n/a: as the inline write: steps' writes are admitted untraced while it is down (Ignore)",
	{webhook, pointSaga}:     "n/a: as the inline write: rollback writes are admitted untraced while it is down (Ignore)",
	{operator, pointSaga}:    "n/a: the operator takes no part in a compensation: the workflows signal each other, the worker writes targets and status",
	{operator, pointInline}:  "n/a: the operator takes no part between a run's start and its end (the worker writes target and status)",
	{operator, pointJob}:     "n/a: as the inline write: the worker creates, watches and reads the Job",
	{operator, pointDrift}:   "n/a: the webhook starts and signals drift workflows; the operator relays only --drift-approval decisions (not used here)",
	{apiserver, pointJob}:    "n/a: the TTL controller runs inside the API server's cluster: with it down, nothing is collected",
	{apiserver, pointDrift}:  "n/a: admission happens inside the API server; with it down no drift can be judged or resolved",
	{webhook, pointReceipt}:  "n/a: the drift webhook admits nothing of a notification or a workflow start",
	{webhook, pointFlap}:     "n/a: as the inline write: an alert run's restart is admitted untraced while it is down (Ignore)",
	{operator, pointReceipt}: "n/a: the receiver (in the worker) matches the rules and starts the workflow; the operator takes no part",
	{operator, pointVerify}:  "n/a: the verify window is a durable timer of the alert's workflow; the resolve reaches it through the worker's receiver",
	{webhook, pointVerify}:   "n/a: as the inline write: the run's restart is admitted untraced while it is down (Ignore)",
}

type row struct{ outcome, detail string }

var (
	tableMu sync.Mutex
	table   = map[[2]string]row{}
)

// parts are the processes the cases share; a case restarts only what it killed.
type parts struct {
	proxy     *procs.Proxy
	worker    *procs.Pod
	webhook   *procs.Pod
	operator  *procs.Pod
	kubectl   procs.Kubectl
	callbacks *callbacks
	cas       map[string][]byte
	// alerting is Alertmanager, routed to the worker's receiver (TestFaults only).
	alerting *alerting
	// upgrade swaps the previous release's processes for this tree's (TestUpgrade).
	upgrade *upgrade
	// args are more arguments for all three processes' next start.
	args []string
}

// kill and restart a process or part by name.
func (p *parts) kill(t *testing.T, what string) {
	t.Helper()
	switch what {
	case worker:
		p.worker.Kill()
	case operator:
		p.operator.Kill()
	case webhook:
		p.webhook.Kill()
	case temporal:
		procs.KillTemporal(t)
	case apiserver:
		procs.KillAPIServer(t)
	case upgraded:
		p.upgrade.stop(t, p)
	default:
		t.Fatalf("kill %s?", what)
	}
	t.Logf("SIGKILLed %s", what)
}

func (p *parts) restart(t *testing.T, what string) {
	t.Helper()
	switch what {
	case worker:
		p.worker.Restart(t)
	case operator:
		p.operator.Restart(t)
	case webhook:
		p.webhook.Restart(t)
		require.Eventually(t, func() bool { return p.webhook.TLSListening("webhook") }, time.Minute, 100*time.Millisecond)
	case temporal:
		procs.RestartTemporal(t)
	case apiserver:
		procs.RestartAPIServer(t)
	case upgraded:
		p.upgrade.start(t, p)
	}
	t.Logf("restarted %s", what)
}

// kubelet restarts a process that exited on its own (the operator ends when
// it loses its lease, as it should while the API server is down) and waits
// for the operator to lead again, so the next case starts whole. It says what it did.
func (p *parts) kubelet(t *testing.T) string {
	var did []string
	for _, pod := range []*procs.Pod{p.worker, p.webhook, p.operator} {
		if !pod.Running() {
			pod.Restart(t)
			did = append(did, pod.Name+" exited on its own and was restarted")
		}
	}
	require.Eventually(t, func() bool { return procs.Leads(p.operator) }, 90*time.Second, 200*time.Millisecond, "the operator leads again")
	return strings.Join(did, "; ")
}

// TestFaults runs every case against one set of processes, then prints the matrix.
func TestFaults(t *testing.T) {
	start := time.Now()
	require.NoError(t, harness.Use(procs.Env()))
	p := setup(t)
	t.Logf("processes up in %.1fs", time.Since(start).Seconds())
	defer func() { printTable(t, time.Since(start)) }()

	for _, c := range cases() {
		t.Run(c.process+"/"+c.point, func(t *testing.T) {
			begun := time.Now()
			detail := c.run(t, p)
			dropWorkloads(t)
			if c.process == apiserver {
				// kube-controller-manager's and the processes' watches come back
				// with backoff: the next case starts once a Deployment settles again.
				whole(t)
			}
			if extra := p.kubelet(t); extra != "" {
				detail = strings.TrimPrefix(detail+"; "+extra, "; ")
			}
			outcome := "PASS"
			if t.Failed() {
				outcome = "FAIL"
			}
			tableMu.Lock()
			table[[2]string{c.process, c.point}] = row{outcome: fmt.Sprintf("%s (%.0fs)", outcome, time.Since(begun).Seconds()), detail: detail}
			tableMu.Unlock()
		})
	}
	t.Run("leader failover", func(t *testing.T) { leaderFailover(t, p) })
}

// dropWorkloads deletes the Deployments the cases made (their namespaces
// are t-...), so the node runs no case's Pods past its end: the cases scale
// them up, and the suite holds many.
func dropWorkloads(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var nss corev1.NamespaceList
	require.NoError(t, harness.Kube().List(ctx, &nss))
	for _, ns := range nss.Items {
		if strings.HasPrefix(ns.Name, "t-") {
			err := harness.Kube().DeleteAllOf(ctx, &appsv1.Deployment{}, ctrlclient.InNamespace(ns.Name), ctrlclient.PropagationPolicy(metav1.DeletePropagationBackground))
			require.NoError(t, err)
		}
	}
}

type faultCase struct {
	process, point string
	run            func(t *testing.T, p *parts) string
}

func setup(t *testing.T) *parts {
	t.Helper()
	p := &parts{proxy: procs.NewProxy(t), kubectl: procs.NewKubectl(t), callbacks: newCallbacks(t), alerting: startAlerting(t)}
	p.start(t, procs.Root, procs.Bin())
	return p
}

// start runs the worker, the drift webhook and the operator as deploy/manager
// in the tree at root declares them, from bin, and waits until they serve.
func (p *parts) start(t *testing.T, root, bin string) {
	t.Helper()
	if p.cas == nil {
		p.cas = procs.IssueCertificates(t)
	}
	// The worker reaches the API server through the proxy, so a case can hold
	// one of its requests; Jobs are collected 3s after they finish.
	args := []string{"--job-ttl=3s", "--drift-callback-url=" + p.callbacks.url}
	if p.alerting != nil {
		args = append(args, p.alerting.args...)
	}
	p.worker = procs.StartPod(t, procs.DeploymentIn(t, root, "remedy-worker"), 0,
		procs.PodOptions{Args: append(args, p.args...), Server: p.proxy.URL, CAData: p.proxy.CA, Bin: bin})
	p.webhook = procs.StartPod(t, procs.DeploymentIn(t, root, "remedy-drift-webhook"), 0, procs.PodOptions{Args: p.args, Bin: bin})
	p.operator = procs.StartPod(t, procs.DeploymentIn(t, root, "remedy-operator"), 0, procs.PodOptions{Args: p.args, Bin: bin})
	require.Eventually(t, func() bool {
		code, _ := procs.Get(p.operator.URL("probes", "/readyz"))
		return code == 200
	}, 90*time.Second, 100*time.Millisecond, "operator never ready:\n%s", p.operator.Out)
	require.Eventually(t, func() bool { return p.webhook.TLSListening("webhook") }, 60*time.Second, 100*time.Millisecond, "drift webhook:\n%s", p.webhook.Out)
	procs.RouteService(t, "remedy-webhook", p.operator)
	procs.RouteService(t, "remedy-drift-webhook", p.webhook)
	procs.InjectCABundles(t, p.cas)
	require.Eventually(t, func() bool { return procs.Leads(p.operator) }, 60*time.Second, 200*time.Millisecond, "the operator never led")
}

// printTable writes the matrix to the test log, stderr and $FAULTS_SUMMARY.
func printTable(t *testing.T, took time.Duration) {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "process\tpoint\toutcome\tdetail")
	tableMu.Lock()
	for _, proc := range processes {
		for _, pt := range points {
			key := [2]string{proc, pt}
			r, ok := table[key]
			switch {
			case ok:
			case notApplicable[key] != "":
				r = row{outcome: "n/a", detail: strings.TrimPrefix(notApplicable[key], "n/a: ")}
			default:
				r = row{outcome: "not run", detail: "no case yet"}
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", proc, pt, r.outcome, r.detail)
		}
	}
	if r, ok := table[[2]string{"operator x2", "leader failover"}]; ok {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", "operator x2", "leader killed, decision pending", r.outcome, r.detail)
	}
	tableMu.Unlock()
	_ = w.Flush()
	out := fmt.Sprintf("fault matrix (suite %.0fs):\n%s", took.Seconds(), b.String())
	t.Log("\n" + out)
	fmt.Fprint(os.Stderr, out)
	if path := os.Getenv("FAULTS_SUMMARY"); path != "" {
		_ = os.WriteFile(path, []byte(out), 0o644)
	}
}

// callbacks receives the drift workflow's DriftReports.
type callbacks struct {
	url     string
	mu      sync.Mutex
	reports map[string]int // "<id>/<phase>" -> count
}

func newCallbacks(t *testing.T) *callbacks {
	c := &callbacks{reports: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep struct {
			Spec struct {
				ID     string `json:"id"`
				Phase  string `json:"phase"`
				Parent struct {
					UID string `json:"uid"`
				} `json:"parent"`
			} `json:"spec"`
		}
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &rep) == nil {
			c.mu.Lock()
			c.reports[rep.Spec.Parent.UID+"/"+rep.Spec.Phase]++
			c.mu.Unlock()
		}
		_, _ = w.Write([]byte(`{"acknowledged":true}`))
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// count is how many reports of phase arrived for the parent.
func (c *callbacks) count(parentUID, phase string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reports[parentUID+"/"+phase]
}

package integration

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/status"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/operator"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// apiProxy stands between a client and the real API server: it can go down
// (connections refused) and come back on the same address, and it can make
// the next status write lose a real resourceVersion race.
type apiProxy struct {
	addr    string
	handler http.Handler

	mu  sync.Mutex
	srv *http.Server
	// beforeStatusPut runs once, before the next PUT of a status subresource is forwarded.
	beforeStatusPut func()
	statusPuts      atomic.Int32
	// dials counts the connections clients of config tried to open, refused ones too.
	dials atomic.Int32
}

func newAPIProxy(t *testing.T, upstream *rest.Config) *apiProxy {
	u, err := url.Parse(upstream.Host)
	require.NoError(t, err)
	// The proxy adds no identity of its own: the client's bearer token passes through.
	tr, err := rest.TransportFor(rest.AnonymousClientConfig(upstream))
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = tr
	p := &apiProxy{}
	p.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/status") {
			p.statusPuts.Add(1)
			p.mu.Lock()
			hook := p.beforeStatusPut
			p.beforeStatusPut = nil
			p.mu.Unlock()
			if hook != nil {
				hook()
			}
		}
		rp.ServeHTTP(w, r)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.addr = l.Addr().String()
	p.serve(l)
	t.Cleanup(func() { p.down() })
	return p
}

func (p *apiProxy) serve(l net.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.srv = &http.Server{Handler: p.handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = p.srv.Serve(l) }()
}

// down closes the listener and every open connection.
func (p *apiProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv != nil {
		_ = p.srv.Close()
		p.srv = nil
	}
}

func (p *apiProxy) up(t *testing.T) {
	l, err := net.Listen("tcp", p.addr)
	require.NoError(t, err)
	p.serve(l)
}

// config is cfg's identity, reaching the API server through the proxy.
func (p *apiProxy) config(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Host = "http://" + p.addr
	c.TLSClientConfig = rest.TLSClientConfig{}
	c.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		p.dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	return c
}

// pushWorkflow writes one status through the workflows' own push options and
// reports the writer's error.
func pushWorkflow(ctx workflow.Context, in status.ExecutionStatusPush) error {
	var s *status.Statuses
	ctx = workflow.WithLocalActivityOptions(ctx, workflows.PushOptions)
	return workflow.ExecuteLocalActivity(ctx, s.PushExecutionStatus, in).Get(ctx, nil)
}

// pushServer is an execution's run as far as its status goes: each "push"
// update writes one status through pushWorkflow, from this one run.
func pushServer(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandler(ctx, "push", pushWorkflow); err != nil {
		return err
	}
	return workflow.Await(ctx, func() bool { return false })
}

// TestStatusPushSurvivesConflictAndOutage drives the worker's status writer,
// as the worker's own ServiceAccount, through a proxy in front of the real API
// server: a write that loses a resourceVersion race is retried, a write made
// while the API server is unreachable lands once it is back, and a stale write
// never takes the object back to an older phase.
// Long: its subtests share one pusher and one execution, in order.
func TestStatusPushSurvivesConflictAndOutage(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	// The target does not exist: the operator's own run fails at once and stops writing.
	k := createExecution(t, ns, "pushed", v1alpha1.KubernetesExecutionSpec{Action: "scale", Target: target(ns, "missing"),
		Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](1)}})
	k = waitPhase(t, k, v1alpha1.PhaseFailed)
	base := k.Status.Sequence
	require.Positive(t, base, "the run wrote its own status")

	proxy, push := startPusher(t, k)
	stored := func() v1alpha1.KubernetesExecutionStatus {
		var cur v1alpha1.KubernetesExecution
		require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(k), &cur))
		return cur.Status
	}

	t.Run("a write that loses a resourceVersion race is retried", func(t *testing.T) {
		var injected error = errors.New("no status PUT reached the proxy")
		proxy.mu.Lock()
		proxy.beforeStatusPut = func() {
			// Someone else writes the object first: the forwarded PUT carries a stale resourceVersion.
			var cur v1alpha1.KubernetesExecution
			if injected = harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(k), &cur); injected == nil {
				before := cur.DeepCopy()
				cur.Labels = map[string]string{"touched": "yes"}
				injected = harness.Kube().Patch(ctx, &cur, ctrlclient.MergeFrom(before))
			}
		}
		proxy.mu.Unlock()
		puts := proxy.statusPuts.Load()
		require.NoError(t, push("conflict", base+1, v1alpha1.PhaseValidating))
		require.NoError(t, injected, "the competing write")
		assert.Equal(t, int32(2), proxy.statusPuts.Load()-puts, "one conflicting PUT, then one that landed")
		s := stored()
		assert.Equal(t, base+1, s.Sequence)
		assert.Equal(t, "pushed by conflict", s.Message)
	})

	t.Run("a write made while the API server is unreachable lands when it is back", func(t *testing.T) {
		proxy.down()
		done := make(chan error, 1)
		dials := proxy.dials.Load()
		go func() { done <- push("outage", base+2, v1alpha1.PhaseExecuting) }()
		// The writer met the refusal and tried again, twice.
		require.Eventually(t, func() bool { return proxy.dials.Load()-dials >= 3 }, 30*time.Second, 50*time.Millisecond,
			"the writer did not retry while the API server was unreachable")
		select {
		case err := <-done:
			require.Failf(t, "push finished while the API server was unreachable", "err: %v", err)
		default:
		}
		proxy.up(t)
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			require.Fail(t, "push did not land after the API server came back")
		}
		s := stored()
		assert.Equal(t, base+2, s.Sequence)
		assert.Equal(t, v1alpha1.PhaseExecuting, s.Phase)
	})

	t.Run("another run's push is refused and sends nothing", func(t *testing.T) {
		before := stored()
		puts := proxy.statusPuts.Load()
		run, err := harness.Temporal().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: ns + "-other", TaskQueue: pushQueue}, pushWorkflow,
			pushedStatus(k, "other", before.Sequence+5, v1alpha1.PhaseValidating))
		require.NoError(t, err)
		err = run.Get(ctx, nil)
		var app *temporal.ApplicationError
		require.ErrorAs(t, err, &app)
		assert.Equal(t, v1alpha1.ReasonSubjectMismatch, app.Type())
		assert.Equal(t, before, stored())
		assert.Equal(t, puts, proxy.statusPuts.Load(), "a refused write is not even sent")
	})

	t.Run("a stale writer never overwrites a newer phase", func(t *testing.T) {
		before := stored()
		puts := proxy.statusPuts.Load()
		require.NoError(t, push("stale", base+1, v1alpha1.PhaseValidating))
		after := stored()
		assert.Equal(t, before.Sequence, after.Sequence)
		assert.Equal(t, v1alpha1.PhaseExecuting, after.Phase)
		assert.Equal(t, "pushed by outage", after.Message)
		assert.Equal(t, puts, proxy.statusPuts.Load(), "a stale write is not even sent")
	})
}

// startPusher runs the worker's status writer, as the worker's own
// ServiceAccount, behind a proxy in front of the API server, in a run that
// becomes k's recorded run. push writes k's status with seq and phase through
// it, as a run of k does.
func startPusher(t *testing.T, k *v1alpha1.KubernetesExecution) (*apiProxy, func(name string, seq int64, phase v1alpha1.Phase) error) {
	ctx := context.Background()
	wcfg, err := devenv.ServiceAccountConfig(ctx, harness.Config(), devenv.Namespace, "remedy-worker")
	require.NoError(t, err)
	proxy := newAPIProxy(t, harness.Config())
	pcfg := proxy.config(wcfg)
	kc, err := ctrlclient.New(pcfg, ctrlclient.Options{Scheme: operator.Scheme()})
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(pcfg)
	require.NoError(t, err)

	w := sdkworker.New(harness.Temporal(), pushQueue, sdkworker.Options{})
	w.RegisterWorkflow(pushWorkflow)
	w.RegisterWorkflow(pushServer)
	w.RegisterActivity(&status.Statuses{Client: kc, Kube: cs})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	// Only the execution's recorded run writes its status: the test's
	// pusher becomes that run, as an administrator rebinding the finished
	// execution to it.
	server, err := harness.Temporal().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: k.Namespace + "-pusher", TaskQueue: pushQueue}, pushServer)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = harness.Temporal().TerminateWorkflow(context.Background(), server.GetID(), server.GetRunID(), "test done")
	})
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(k), k))
	k.Status.WorkflowID, k.Status.RunID = server.GetID(), server.GetRunID()
	require.NoError(t, harness.Kube().Status().Update(ctx, k))

	return proxy, func(name string, seq int64, phase v1alpha1.Phase) error {
		h, err := harness.Temporal().UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: server.GetID(), RunID: server.GetRunID(),
			UpdateName: "push", Args: []any{pushedStatus(k, name, seq, phase)}, WaitForStage: client.WorkflowUpdateStageCompleted})
		require.NoError(t, err)
		return h.Get(ctx, nil)
	}
}

// pushQueue is the task queue of the test's status writer.
const pushQueue = "status-faults"

// pushedStatus is k's status moved to phase with sequence seq, as a run's push carries it.
func pushedStatus(k *v1alpha1.KubernetesExecution, name string, seq int64, phase v1alpha1.Phase) status.ExecutionStatusPush {
	st := *k.Status.DeepCopy()
	st.Sequence, st.Phase, st.Reason, st.Message = seq, phase, string(phase), "pushed by "+name
	st.PhaseTransitions = append(st.PhaseTransitions, v1alpha1.PhaseTransition{Phase: phase, Reason: string(phase), Time: metav1.NowMicro()})
	return status.ExecutionStatusPush{Namespace: k.Namespace, Name: k.Name, UID: string(k.UID), Action: "scale", Status: st}
}

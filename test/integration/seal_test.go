package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/proxy"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/internal/seal"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/worker"
	"github.com/remedy-dev/remedy/workflows"
)

// refusedPayloads reads remedy_payloads_refused_total{kind} from this
// process's registry, where the package's operator and worker run.
func refusedPayloads(kind string) float64 {
	return testutil.ToFloat64(metrics.PayloadsRefused.WithLabelValues(kind))
}

// rogueClient reaches Temporal as anyone who can: no Kubernetes
// credentials, no payload key: the SDK's plain converter, or keys of its own.
func rogueClient(t *testing.T, keys *seal.Keyring) client.Client {
	t.Helper()
	o := client.Options{HostPort: harness.TemporalAddress(), Namespace: "default"}
	if keys != nil {
		o.DataConverter = seal.DataConverter(keys)
	}
	c, err := client.Dial(o)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// foreignKeys is a keyring Remedy's parts do not hold.
func foreignKeys(t *testing.T) *seal.Keyring {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, devenv.NewPayloadKeys(dir, "rogue-1"))
	k, err := seal.LoadKeyring(dir)
	require.NoError(t, err)
	return k
}

// A signal Remedy's parts did not seal is refused before the workflow sees
// it: not delivered, counted by kind, and a Warning Event on the subject.
func TestUnsealedSignalIsRefusedCountedAndWarned(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k, rar := awaitingApproval(t, ns, "scale-unsealed", time.Hour, 0)
	id := k.Status.WorkflowID
	unsealed, unknownKey := refusedPayloads(seal.RefusedUnsealed), refusedPayloads(seal.RefusedUnknownKey)

	approval := workflows.ApprovalSignal{Approver: "alice", Request: rar.Name}
	require.NoError(t, rogueClient(t, nil).SignalWorkflow(ctx, id, "", workflows.SignalApprove, approval), "Temporal accepts it: anyone may signal")
	require.NoError(t, rogueClient(t, foreignKeys(t)).SignalWorkflow(ctx, id, "", workflows.SignalApprove, approval))

	note := warningEventWith(t, ns, "KubernetesExecution", k.Name, v1alpha1.ReasonRefusedSignal).Note
	assert.Contains(t, note, `signal "approve" was refused and not delivered`)
	assert.Contains(t, note, "payload refused")
	require.Eventually(t, func() bool {
		return refusedPayloads(seal.RefusedUnsealed) > unsealed && refusedPayloads(seal.RefusedUnknownKey) > unknownKey
	}, 30*time.Second, 100*time.Millisecond, "both refusals counted")
	assert.Equal(t, v1alpha1.PhaseWaitingApproval, queryPhase(t, id), "neither approved anything")
	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "web"}, &d))
	assert.Equal(t, int32(1), *d.Spec.Replicas, "nothing written")
}

// snapshot is every object of a namespace a write could touch, by kind/name, with its resourceVersion.
func snapshot(t *testing.T, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for kind, list := range map[string]ctrlclient.ObjectList{
		"Deployment": &appsv1.DeploymentList{}, "ReplicaSet": &appsv1.ReplicaSetList{}, "ConfigMap": &corev1.ConfigMapList{},
		"Secret": &corev1.SecretList{}, "Pod": &corev1.PodList{}, "ServiceAccount": &corev1.ServiceAccountList{},
		"KubernetesExecution": &v1alpha1.KubernetesExecutionList{}, "RemediationApprovalRequest": &v1alpha1.RemediationApprovalRequestList{},
	} {
		require.NoError(t, harness.Kube().List(context.Background(), list, ctrlclient.InNamespace(ns)))
		items, err := metaItems(list)
		require.NoError(t, err)
		for name, rv := range items {
			out[kind+"/"+name] = rv
		}
	}
	return out
}

func metaItems(list ctrlclient.ObjectList) (map[string]string, error) {
	out := map[string]string{}
	objs, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		m, err := apimeta.Accessor(o)
		if err != nil {
			return nil, err
		}
		out[m.GetName()] = m.GetResourceVersion()
	}
	return out, nil
}

// rogueSchedule is the rogue's workflow: it schedules each named activity on
// Remedy's task queue with the forged input, all at once, and reports how
// each ended: "<type>/<ApplicationError type>/nonretryable=<bool>".
func rogueSchedule(ctx workflow.Context, names []string, forged map[string]any) ([]string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: workflows.TaskQueue, StartToCloseTimeout: time.Minute,
		// Retries would show a refusal that is not permanent.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: 5},
	})
	// Each with the forged input, and with none (which no codec would see).
	var futures []workflow.Future
	var labels []string
	for _, n := range names {
		futures = append(futures, workflow.ExecuteActivity(ctx, n, forged), workflow.ExecuteActivity(ctx, n))
		labels = append(labels, n+"(forged)", n+"(no input)")
	}
	out := make([]string, len(futures))
	for i, f := range futures {
		err := f.Get(ctx, nil)
		var app *temporal.ApplicationError
		switch {
		case err == nil:
			out[i] = labels[i] + "/ran"
		case errors.As(err, &app):
			out[i] = fmt.Sprintf("%s/%s/nonretryable=%t", labels[i], app.Type(), app.NonRetryable())
		default:
			out[i] = labels[i] + "/" + err.Error()
		}
	}
	return out, nil
}

// A rogue worker with no Kubernetes credentials and no key runs a workflow of
// its own that schedules every activity Remedy's worker registers on
// Remedy's task queue, with inputs it chose from a live run's subject: each
// is refused before any activity code runs, with that input and with none,
// for good (one attempt), and
// counted; nothing in the namespace is written, and the live run's history
// shows none of its payloads' content.
func TestRogueWorkerSchedulesEveryActivity(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k, _ := awaitingApproval(t, ns, "scale-rogue", time.Hour, 0)
	// The run's own writes (its approval request's status) settle first.
	var before map[string]string
	require.Eventually(t, func() bool {
		prev := before
		before = snapshot(t, ns)
		return prev != nil && assert.ObjectsAreEqual(prev, before)
	}, time.Minute, 2*time.Second, "the namespace settles")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(k), k))
	phase := k.Status.Phase

	cfg, err := devenv.ServiceAccountConfig(ctx, harness.Config(), devenv.Namespace, "remedy-worker")
	require.NoError(t, err)
	remedy, err := worker.New(worker.Options{Temporal: harness.Temporal(), PayloadKeys: harness.Keys(), Kube: cfg, ActionNamespace: devenv.Namespace})
	require.NoError(t, err)
	names := worker.ActivityTypes(remedy)
	require.Greater(t, len(names), 20, "Remedy's worker registers its activities: %v", names)

	rogue := rogueClient(t, nil)
	queue := "rogue-" + ns
	w := sdkworker.New(rogue, queue, sdkworker.Options{})
	w.RegisterWorkflow(rogueSchedule)
	require.NoError(t, w.Start())
	defer w.Stop()
	// What the run's subject names, as a reader of Temporal learns it.
	forged := map[string]any{
		"namespace": ns, "name": k.Name, "uid": string(k.UID), "action": "set-image", "requester": "admin",
		"target":     map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": ns, "name": "web"},
		"parameters": map[string]any{"image": "rogue.example/owned:1", "container": "web", "replicas": 9},
	}
	unsealed := refusedPayloads(seal.RefusedUnsealed)
	run, err := rogue.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "rogue-" + ns, TaskQueue: queue}, rogueSchedule, names, forged)
	require.NoError(t, err)
	var outcomes []string
	require.NoError(t, run.Get(ctx, &outcomes))
	for _, o := range outcomes {
		assert.True(t, strings.HasSuffix(o, "/"+seal.TypeRefused+"/nonretryable=true"), "refused for good: %s", o)
	}
	require.Len(t, outcomes, 2*len(names))
	assert.GreaterOrEqual(t, refusedPayloads(seal.RefusedUnsealed)-unsealed, float64(len(outcomes)), "every refusal counted")
	// One attempt each: ActivityTaskStarted records the last attempt.
	it := rogue.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	started := 0
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil {
			started++
			assert.Equal(t, int32(1), a.GetAttempt(), "a refusal is not retried")
		}
	}
	assert.Equal(t, len(outcomes), started)

	assert.Equal(t, before, snapshot(t, ns), "nothing in the namespace was written")
	var now v1alpha1.KubernetesExecution
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(k), &now))
	assert.Equal(t, phase, now.Status.Phase, "the live run's status did not change")
	assertHistorySealed(t, k.Status.WorkflowID, string(k.UID), ns)
}

// assertHistorySealed reads a run's raw history as the rogue can: every
// payload is sealed under Remedy's key and none holds any of the probes.
func assertHistorySealed(t *testing.T, workflowID string, probes ...string) {
	t.Helper()
	ctx := context.Background()
	it := rogueClient(t, nil).GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		require.NoError(t, proxy.VisitPayloads(ctx, e, proxy.VisitPayloadsOptions{SkipSearchAttributes: true,
			Visitor: func(_ *proxy.VisitPayloadsContext, ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
				for _, p := range ps {
					n++
					id, ok := seal.SealedWith(p)
					assert.True(t, ok, "event %d (%s): a payload is not sealed", e.GetEventId(), e.GetEventType())
					assert.Equal(t, harness.Keys().Active(), id)
					for _, probe := range probes {
						assert.False(t, bytes.Contains(p.GetData(), []byte(probe)), "event %d (%s) shows %q", e.GetEventId(), e.GetEventType(), probe)
					}
				}
				return ps, nil
			}}))
	}
	assert.Positive(t, n, "the history has payloads")
}

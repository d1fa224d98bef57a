package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/harness"
)

func admin(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(harness.Config())
	require.NoError(t, err)
	return cs
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// A Job that outlives spec.timeout (this package runs no node, so its Pod
// never starts) hits its activeDeadlineSeconds: the run fails
// ExecutionTimeout and nothing changed. The job executor's Pods run for real
// in test/node.
func TestJobExecutorDeadlineFailsTheRun(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	spec := scaleSpec(ns, "web", 3)
	spec.Executor = v1alpha1.ExecutorJob
	spec.Timeout = v1alpha1.DurationOf(2 * time.Second)
	spec.MaxRetries = ptr.To[int32](0)
	k := waitPhase(t, createExecution(t, ns, "slow-job", spec), v1alpha1.PhaseFailed)
	assert.Equal(t, v1alpha1.ReasonExecutionTimeout, k.Status.Reason, k.Status.Message)
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
	harness.ReplayHistory(t, k.Status.WorkflowID, "execution-timeout.json")
}

// TestExecRequest runs the body of `remedy exec` as the action's
// ServiceAccount, as the Job's pod would.
func TestExecRequest(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	cfg, err := devenv.ServiceAccountConfig(ctx, harness.Config(), devenv.Namespace, actions.ServiceAccountName("scale"))
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	termLog := filepath.Join(t.TempDir(), "termination-log")
	req := actions.Request{Action: "scale", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"},
		Params: v1alpha1.ActionParameters{Replicas: ptr.To[int32](3)}}

	var asked []actions.Request
	pass := func(_ context.Context, r actions.Request) error { asked = append(asked, r); return nil }
	plan, err := execution.ExecRequest(ctx, dyn, mapper, []byte(mustJSON(t, req)), termLog, pass)
	require.NoError(t, err)
	assert.Equal(t, []actions.Request{req}, asked, "the gate is asked about the write before it is made")
	written, err := os.ReadFile(termLog)
	require.NoError(t, err)
	var got actions.Plan
	require.NoError(t, json.Unmarshal(written, &got), "the termination log is the plan's JSON")
	assert.Equal(t, plan, got)
	assert.Equal(t, "replicas: 3", got.Change.After)
	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "web"}, &d))
	assert.Equal(t, int32(3), *d.Spec.Replicas)

	// A refusal writes nothing and says so in the termination log.
	req.Params.Replicas = ptr.To[int32](5)
	refuse := func(context.Context, actions.Request) error { return &execution.GateRefusal{Message: "grant revoked"} }
	_, err = execution.ExecRequest(ctx, dyn, mapper, []byte(mustJSON(t, req)), termLog, refuse)
	require.Error(t, err)
	written, err = os.ReadFile(termLog)
	require.NoError(t, err)
	assert.Contains(t, string(written), "refused by the write gate: grant revoked")
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: "web"}, &d))
	assert.Equal(t, int32(3), *d.Spec.Replicas, "nothing written")

	req.Target.Name = "missing"
	_, err = execution.ExecRequest(ctx, dyn, mapper, []byte(mustJSON(t, req)), termLog, pass)
	require.Error(t, err)
	written, err = os.ReadFile(termLog)
	require.NoError(t, err)
	assert.Contains(t, string(written), `"missing" not found`)
}

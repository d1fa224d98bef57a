package dev

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

var (
	kexecs = schema.GroupVersionResource{Group: "remedy.dev", Version: "v1alpha1", Resource: "kubernetesexecutions"}
	rars   = schema.GroupVersionResource{Group: "remedy.dev", Version: "v1alpha1", Resource: "remediationapprovalrequests"}
)

// TestDevStateDirResumesARun: a run waiting for approval survives `remedy
// dev` being killed, even by SIGKILL; the next start with the same
// --state-dir finds the object and its workflow, and the approval made then
// carries the run through.
func TestDevStateDirResumesARun(t *testing.T) {
	repo, p := newRepo(t), freePorts(t)
	state := filepath.Join(t.TempDir(), "state")
	first := startDev(t, repo, p, "-state-dir", state)
	t.Cleanup(func() { first.stop(t) })
	first.waitReady(t, 3*time.Minute)
	dyn := dynamicFor(t, repo)
	ctx := context.Background()

	kexec := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "remedy.dev/v1alpha1", "kind": "KubernetesExecution",
		"metadata": map[string]any{"name": "scale-later", "namespace": "demo"},
		"spec": map[string]any{
			"action":     "scale",
			"target":     map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "demo", "name": "web"},
			"parameters": map[string]any{"replicas": int64(2)},
			"approval":   map[string]any{"required": true},
		},
	}}
	_, err := dyn.Resource(kexecs).Namespace("demo").Create(ctx, kexec, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPhase(t, dyn, "WaitingApproval")

	require.NoError(t, first.cmd.Process.Kill())
	<-first.exited

	second := startDev(t, repo, p, "-state-dir", state)
	t.Cleanup(func() { second.stop(t) })
	second.waitReady(t, 3*time.Minute)
	assert.Contains(t, second.out.String(), "resuming from "+state)
	dyn = dynamicFor(t, repo) // a new API server port and client certificate

	_, err = dyn.Resource(rars).Namespace("demo").Patch(ctx, "scale-later-approval", types.MergePatchType,
		[]byte(`{"status":{"decision":"Approved","decisionMessage":"after lunch"}}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	waitPhase(t, dyn, "RollbackReady")
	web, err := dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace("demo").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	replicas, _, _ := unstructured.NestedInt64(web.Object, "spec", "replicas")
	assert.EqualValues(t, 2, replicas)
}

func dynamicFor(t *testing.T, repo string) dynamic.Interface {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(repo, ".dev", "kubeconfig"))
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	return dyn
}

func waitPhase(t *testing.T, dyn dynamic.Interface, phase string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := dyn.Resource(kexecs).Namespace("demo").Get(context.Background(), "scale-later", metav1.GetOptions{})
		if !assert.NoError(c, err) {
			return
		}
		p, _, _ := unstructured.NestedString(got.Object, "status", "phase")
		assert.Equal(c, phase, p)
	}, time.Minute, 200*time.Millisecond)
}

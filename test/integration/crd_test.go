package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// Every invalid sample is refused at admission with the message its "# want:" line names.
func TestInvalidSamplesAreRejected(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(harness.Root, "test", "testdata", "invalid", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			require.NoError(t, err)
			first, _, _ := strings.Cut(string(raw), "\n")
			want, ok := strings.CutPrefix(first, "# want: ")
			require.True(t, ok, "first line must be '# want: <message>'")
			objs := decode(t, raw)
			require.Len(t, objs, 1)
			err = harness.Kube().Create(context.Background(), objs[0], ctrlclient.DryRunAll)
			require.Error(t, err, "the API server accepted an invalid object")
			assert.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			assert.Contains(t, err.Error(), want)
		})
	}
}

// Every sample under deploy/samples, the default policy, temporal-dev.yaml, Remedy's
// Deployments and NetworkPolicies are accepted as written.
func TestSamplesAreValid(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(harness.Root, "deploy", "samples", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	// deploy/policies/safety.yaml is not here: the harness installs it for real.
	files = append(files, filepath.Join(harness.Root, "temporal-dev.yaml"),
		filepath.Join(harness.Root, "deploy", "manager", "manager.yaml"), filepath.Join(harness.Root, "deploy", "manager", "drift-webhook.yaml"))
	network, err := filepath.Glob(filepath.Join(harness.Root, "deploy", "network", "*.yaml"))
	require.NoError(t, err)
	for _, f := range network {
		if filepath.Base(f) != "kustomization.yaml" {
			files = append(files, f)
		}
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "demo"}}}
	if err := harness.Kube().Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, o := range decode(t, raw) {
				require.NoError(t, harness.Kube().Create(context.Background(), o, ctrlclient.DryRunAll))
			}
		})
	}
}

func TestSpecsAreImmutable(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	rar := &v1alpha1.RemediationApprovalRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "approve-me", Namespace: ns},
		Spec: v1alpha1.RemediationApprovalRequestSpec{
			SubjectRef: v1alpha1.ObjectRef{APIVersion: "remedy.dev/v1alpha1", Kind: "KubernetesExecution", Namespace: ns, Name: "x"},
			WorkflowID: "kexec/x",
			ApprovalContext: v1alpha1.ApprovalContext{
				Reason: "policy", Action: "scale",
				Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"},
			},
			RequiredBy: metav1.Now(),
		},
	}
	// Only the worker creates approval requests (deploy/admission).
	worker := asWorker(t)
	require.NoError(t, worker.Create(ctx, rar))
	rar.Spec.ApprovalContext.Reason = "changed my mind"
	err := harness.Kube().Update(ctx, rar)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec is immutable")

	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	rar.Status.Decision, rar.Status.DecidedBy, rar.Status.DecidedVia = v1alpha1.DecisionApproved, "alice", v1alpha1.DecidedViaSignal
	require.NoError(t, worker.Status().Update(ctx, rar))
	rar.Status.Decision = v1alpha1.DecisionRejected
	err = worker.Status().Update(ctx, rar)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "decision is final once set")
}

func decode(t *testing.T, raw []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var o unstructured.Unstructured
		err := dec.Decode(&o.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		if len(o.Object) > 0 {
			out = append(out, &o)
		}
	}
}

package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// The raw kubectl approval path: each mistake a user makes with
// `kubectl patch rar` is refused with a message that says what to write,
// instead of kubectl's "patched (no change)". Each is sent by the pinned
// kubectl itself, then as the same merge patch from a client (with or
// without the status subresource, no field validation asked: kubectl patch
// has no --validate).
func TestKubectlApprovalMistakesAreRefused(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	_, rar := awaitingApproval(t, ns, "scale-mistakes", time.Hour, 0)
	grant(t, ns, "carol", "approve", "patch")
	carol := impersonating(t, "carol")
	patch := func(body string) ctrlclient.Patch { return ctrlclient.RawPatch(types.MergePatchType, []byte(body)) }
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, harness.WriteKubeconfig(kubeconfig))

	for _, tc := range []struct {
		name      string
		status    bool // --subresource=status
		body      string
		want      []string
		wantNot   []string
		wantError func(error) bool
	}{
		{
			name: "without --subresource=status", body: `{"status":{"decision":"Approved"}}`,
			want:      []string{"the status is written only through the status subresource", "add --subresource=status", "patched (no change)"},
			wantError: apierrors.IsInvalid,
		},
		{
			name: "a field typo", status: true, body: `{"status":{"decison":"Approved"}}`,
			want:      []string{"changes nothing in the status", `status.decision "Approved" or "Rejected"`},
			wantError: apierrors.IsInvalid,
		},
		{
			name: "a decision that is not one", status: true, body: `{"status":{"decision":"Approve"}}`,
			want:      []string{`status.decision: Unsupported value "Approve"`, `"Approved" or "Rejected"`},
			wantNot:   []string{"requestedDecision", "Expired"},
			wantError: apierrors.IsInvalid,
		},
	} {
		t.Run(tc.name+" (kubectl)", func(t *testing.T) {
			args := []string{"--kubeconfig", kubeconfig, "--as", "carol", "--as-group", "system:authenticated",
				"patch", "rar", rar.Name, "-n", ns, "--type=merge", "-p", tc.body}
			if tc.status {
				args = append(args, "--subresource=status")
			}
			out, err := exec.Command(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"), args...).CombinedOutput()
			require.Error(t, err, "kubectl exits non-zero: %s", out)
			assert.NotContains(t, string(out), rar.Name+" patched", "kubectl's success line")
			for _, w := range tc.want {
				assert.Contains(t, string(out), w)
			}
		})
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.status {
				err = carol.Status().Patch(ctx, rar.DeepCopy(), patch(tc.body))
			} else {
				err = carol.Patch(ctx, rar.DeepCopy(), patch(tc.body))
			}
			require.Error(t, err, "kubectl would exit 0")
			assert.True(t, tc.wantError(err), "want 422, got %v", err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			for _, w := range tc.wantNot {
				assert.NotContains(t, err.Error(), w)
			}
		})
	}

	got := &v1alpha1.RemediationApprovalRequest{}
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), got))
	assert.Nil(t, got.Status.RequestedDecision, "no mistake reached the workflow")
	// Metadata updates of the main resource still pass.
	require.NoError(t, carol.Patch(ctx, got.DeepCopy(), patch(`{"metadata":{"labels":{"team":"shop"}}}`)))
	require.NoError(t, carol.Status().Patch(ctx, got, patch(`{"status":{"decision":"Approved"}}`)))
	require.NotNil(t, got.Status.RequestedDecision)
	assert.Equal(t, "carol", got.Status.RequestedDecision.RequestedBy)
}

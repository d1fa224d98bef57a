package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// A patch's metadata.labels and annotations are applied as asked (they were
// dropped: the write's metadata held only the pinned resourceVersion), and
// its rollback restores them, removing only what it added.
func TestPatchAppliesLabelsAndAnnotations(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns, Labels: map[string]string{"team": "web"}},
		Data: map[string]string{"mode": "fast"}}
	require.NoError(t, harness.Kube().Create(ctx, cm))
	body := `{"metadata":{"labels":{"team":"payments","tier":"gold"},"annotations":{"remedy.dev/why":"incident 42"}},"data":{"mode":"safe"}}`
	k := waitPhase(t, createExecution(t, ns, "label", v1alpha1.KubernetesExecutionSpec{Action: "patch",
		Target:         v1alpha1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "settings"},
		Parameters:     &v1alpha1.ActionParameters{Patch: &apiextensionsv1.JSON{Raw: []byte(body)}},
		RollbackWindow: v1alpha1.DurationOf(time.Hour)}), v1alpha1.PhaseRollbackReady)

	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(cm), cm))
	assert.Equal(t, map[string]string{"team": "payments", "tier": "gold"}, cm.Labels)
	assert.Equal(t, "incident 42", cm.Annotations["remedy.dev/why"])
	assert.Equal(t, "safe", cm.Data["mode"])

	// Someone else annotates it meanwhile: the rollback leaves that alone.
	cm.Annotations["owner"] = "sre"
	require.NoError(t, harness.Kube().Update(ctx, cm))
	require.NoError(t, harness.Kube().Patch(ctx, k, ctrlclient.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"remedy.dev/rollback":"wrong team"}}}`))))
	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, v1alpha1.ReasonRolledBack, k.Status.Reason)
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(cm), cm))
	assert.Equal(t, map[string]string{"team": "web"}, cm.Labels)
	assert.Equal(t, map[string]string{"owner": "sre"}, cm.Annotations)
	assert.Equal(t, "fast", cm.Data["mode"])
}

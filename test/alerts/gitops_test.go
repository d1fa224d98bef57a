package alerts

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/test/harness"
)

// A target Flux manages (its kustomize- or helm-controller's tracking
// label or annotation), or Argo CD by its instance label, is refused like
// one carrying Argo CD's tracking annotation: the reason names the
// controller and the mark, and nothing runs.
func TestFluxAndArgoLabelsRefuseLikeArgoAnnotations(t *testing.T) {
	for _, tc := range []struct {
		name, key, manager string
		label              bool
	}{
		{"Flux kustomization label", "kustomize.toolkit.fluxcd.io/name", "Flux", true},
		{"Flux kustomization annotation", "kustomize.toolkit.fluxcd.io/name", "Flux", false},
		{"Flux HelmRelease label", "helm.toolkit.fluxcd.io/name", "Flux", true},
		{"Argo CD instance label", "argocd.argoproj.io/instance", "Argo CD", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := tenant(t)
			d := harness.Deployment(t, ns, "web", 1)
			mark, where := map[string]string{tc.key: "shop"}, "annotation"
			if tc.label {
				for k, v := range d.Labels {
					mark[k] = v
				}
				d.Labels, where = mark, "label"
			} else {
				d.Annotations = mark
			}
			require.NoError(t, harness.Kube().Update(context.Background(), d))
			rec, l := refusedAsGitOps(t, ns, "web")
			assert.Contains(t, rec.Message, tc.manager+" ("+where+" "+tc.key+")")
			resolve(t, l)
			harness.WaitClosed(t, rec.WorkflowID, 30*time.Second)
		})
	}
}

// refusedAsGitOps creates a restart rule, fires its alert on the
// Deployment, and waits until the rule refuses it as GitOps-managed, with
// nothing run. It returns the refusal and the alert's labels.
func refusedAsGitOps(t *testing.T, ns, deployment string) (*v1alpha1.AlertRecord, map[string]string) {
	t.Helper()
	rule := createRule(t, restartRule(ns, "gitops", "GitOps"))
	l := labels(ns, "GitOps", "deployment", deployment)
	firedUntil(t, rule, l, v1alpha1.AlertRefused)
	rec := record(ruleStatus(t, rule, time.Second, func(*v1alpha1.RemediationRule) bool { return true }), alertmanager.Fingerprint(l))
	assert.Equal(t, v1alpha1.ReasonGitOpsManaged, rec.Reason)
	assert.Empty(t, requestsOf(t, ns, rule.Name), "nothing ran")
	return rec, l
}

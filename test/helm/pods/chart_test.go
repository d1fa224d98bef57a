package pods

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/remedy-dev/remedy/test/procs"
)

// TestChartRunsAsPods: the chart with its default values but the Temporal
// address and the webhook client CA runs every component as Pods that are
// what deploy/ declares (the chart renders deploy/: TestChartRendersDeploy),
// and a run completes through its worker.
func TestChartRunsAsPods(t *testing.T) {
	ctx := context.Background()
	ca, err := os.ReadFile(procs.Env().WebhookClientCA)
	require.NoError(t, err)
	ch, err := loader.Load(filepath.Join(procs.Root, "deploy", "helm", "remedy"))
	require.NoError(t, err)
	inst := action.NewInstall(procs.HelmConfig(t))
	inst.ReleaseName, inst.Namespace, inst.Timeout = "remedy", "default", 2*time.Minute
	rel, err := inst.RunWithContext(ctx, ch, map[string]any{
		"temporal":        map[string]any{"address": procs.Env().TemporalAddress},
		"webhookClientCA": string(ca),
		"payloadKeys":     procs.PayloadKeysValues(t),
	})
	require.NoError(t, err, "helm install")
	t.Logf("helm install: release %s revision %d %s, chart %s", rel.Name, rel.Version, rel.Info.Status, rel.Chart.Metadata.Version)

	issued := time.Now()
	procs.InjectCABundles(t, procs.IssueCertificates(t))
	deployments := procs.InstalledDeployments(t)
	procs.CheckDeployedPods(t, deployments, issued)
	t.Run("a run completes through the chart's worker", func(t *testing.T) {
		kubectl := procs.NewKubectl(t)
		kubectl.Run(t, "create", "namespace", "pods")
		kubectl.Apply(t, procs.DemoDeployment("pods", "web", 1))
		procs.WaitAvailable(t, "pods", "web", 1)
		procs.Scale(t, kubectl, "pods", "scale-web", "inline", 2)
	})
}

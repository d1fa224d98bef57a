// Package helm installs the Helm chart deploy/helm/remedy into the real API
// server with the Helm Go SDK, runs the three processes from the
// Deployments the chart created (test/procs), and walks through README's
// walkthrough against them: scale, status, rollback.
package helm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/release"
	"github.com/remedy-dev/remedy/test/procs"
)

func TestMain(m *testing.M) { os.Exit(procs.Main(m, procs.Options{Name: "helm", NoInstall: true})) }

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// Long: one chart installation walked through in order; its steps share the release.
func TestChartInstalledAndWalkedThrough(t *testing.T) {
	start := time.Now()
	ctx := context.Background()
	ca, err := os.ReadFile(procs.Env().WebhookClientCA)
	require.NoError(t, err)
	values := map[string]any{
		// The Temporal the harness runs, and the CA of the API server's webhook client certificate.
		"temporal":        map[string]any{"address": procs.Env().TemporalAddress},
		"webhookClientCA": string(ca),
		"payloadKeys":     procs.PayloadKeysValues(t),
		"image":           map[string]any{"digest": digest},
		"operator":        map[string]any{"replicas": 1},
		"worker":          map[string]any{"replicas": 1, "resources": map[string]any{"limits": map[string]any{"memory": "512Mi"}}},
	}
	cfg := procs.HelmConfig(t)
	ch, err := loader.Load(filepath.Join(procs.Root, "deploy", "helm", "remedy"))
	require.NoError(t, err)
	inst := action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace, inst.Timeout = "remedy", "default", 2*time.Minute
	rel, err := inst.RunWithContext(ctx, ch, values)
	require.NoError(t, err, "helm install")
	t.Logf("helm install: release %s revision %d %s, chart %s", rel.Name, rel.Version, rel.Info.Status, rel.Chart.Metadata.Version)
	require.NoError(t, devenv.Install(ctx, procs.Env().Config, filepath.Join(procs.Root, "deploy", "rbac", "approver-example.yaml")))

	cs := procs.Clientset(t)
	deployment := func(name string) string {
		d, err := cs.AppsV1().Deployments(devenv.Namespace).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "the chart created %s", name)
		return fmt.Sprint(*d.Spec.Replicas, " ", d.Spec.Template.Spec.Containers[0].Image, " ", d.Spec.Template.Spec.Containers[0].Resources.Limits.Memory())
	}
	t.Run("the values reach the installed objects", func(t *testing.T) {
		image := release.Image() + "@" + digest
		assert.Equal(t, "1 "+image+" 256Mi", deployment("remedy-operator"))
		assert.Equal(t, "1 "+image+" 512Mi", deployment("remedy-worker"))
		assert.Equal(t, "2 "+image+" 256Mi", deployment("remedy-drift-webhook"))
		cm, err := cs.CoreV1().ConfigMaps(devenv.Namespace).Get(ctx, "remedy-exec-image", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, image, cm.Data["image"], "the worker-jobs admission policy admits the pinned image")
		sec, err := cs.CoreV1().Secrets(devenv.Namespace).Get(ctx, "remedy-webhook-client-ca", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, ca, sec.Data["ca.crt"])
	})

	// The processes as the chart's Deployments declare them, read back from the API server.
	cas := procs.IssueCertificates(t)
	get := func(name string) *procs.Pod {
		d, err := cs.AppsV1().Deployments(devenv.Namespace).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return procs.StartPod(t, *d, 0)
	}
	get("remedy-worker")
	drift, operator := get("remedy-drift-webhook"), get("remedy-operator")
	require.Eventually(t, func() bool {
		code, _ := procs.Get(operator.URL("probes", "/readyz"))
		return code == 200
	}, 90*time.Second, 100*time.Millisecond, "operator never ready:\n%s", operator.Out)
	require.Eventually(t, func() bool { return drift.TLSListening("webhook") }, 60*time.Second, 100*time.Millisecond, "drift webhook:\n%s", drift.Out)
	procs.RouteService(t, "remedy-webhook", operator)
	procs.RouteService(t, "remedy-drift-webhook", drift)
	procs.InjectCABundles(t, cas)

	t.Run("walkthrough: scale, status, rollback", func(t *testing.T) {
		kubectl := procs.NewKubectl(t)
		kubectl.Run(t, "apply", "-f", filepath.Join(procs.Root, "deploy", "samples", "demo"))
		before := kubectl.Run(t, "get", "deployment", "web", "-n", "demo", "-o", "jsonpath={.spec.replicas}")
		kubectl.Run(t, "apply", "-f", filepath.Join(procs.Root, "deploy", "samples", "kexec-scale.yaml"))
		kubectl.WaitPhase(t, "demo", "scale-web", "RollbackReady")
		assert.Equal(t, "3", kubectl.Run(t, "get", "deployment", "web", "-n", "demo", "-o", "jsonpath={.spec.replicas}"))

		out := plugin(t, "status", "kexec", "scale-web", "-n", "demo")
		assert.Contains(t, out, "RollbackReady")
		assert.Contains(t, out, "Rollback:")
		out = plugin(t, "rollback", "scale-web", "-n", "demo", "-m", "latency went up", "--wait", "1m")
		t.Logf("kubectl remedy rollback:\n%s", out)
		kubectl.WaitPhase(t, "demo", "scale-web", "Completed")
		assert.Equal(t, "RolledBack", kubectl.Run(t, "get", "kexec", "scale-web", "-n", "demo", "-o", "jsonpath={.status.reason}"))
		assert.Equal(t, before, kubectl.Run(t, "get", "deployment", "web", "-n", "demo", "-o", "jsonpath={.spec.replicas}"), "web is back")
	})

	t.Run("helm upgrade changes the values in place", func(t *testing.T) {
		up := action.NewUpgrade(procs.HelmConfig(t))
		up.Namespace, up.ReuseValues = "default", true
		rel, err := up.RunWithContext(ctx, "remedy", ch, map[string]any{"worker": map[string]any{"replicas": 3}})
		require.NoError(t, err, "helm upgrade")
		assert.Equal(t, 2, rel.Version)
		assert.Equal(t, "3 "+release.Image()+"@"+digest+" 512Mi", deployment("remedy-worker"))
	})
	t.Logf("helm test took %.1fs", time.Since(start).Seconds())
}

// plugin runs `kubectl remedy` (the built binary as kubectl-remedy) as cluster-admin.
func plugin(t *testing.T, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "kubectl-remedy")
	require.NoError(t, os.Symlink(procs.Bin(), path))
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+procs.AdminKubeconfig(), "TEMPORAL_ADDRESS="+procs.Env().TemporalAddress)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubectl remedy %s: %s", strings.Join(args, " "), out)
	return string(out)
}

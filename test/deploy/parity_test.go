package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/internal/pki"
	"github.com/remedy-dev/remedy/internal/release"
	"github.com/remedy-dev/remedy/test/procs"
)

// The three processes of deploy/manager, as written, do Remedy's work with
// only the RBAC deploy/ grants. test/deploy/pods checks the same manifests
// as Pods on a real node (procs.CheckPodParity: what runs in each Pod is
// what deploy/ declares).
// Long: its subtests share the four processes it starts, which cost most of its time.
func TestDeployedProcesses(t *testing.T) {
	start := time.Now()
	cas := procs.IssueCertificates(t)
	worker := procs.StartPod(t, procs.Deployment(t, "remedy-worker"), 0)
	drift := procs.StartPod(t, procs.Deployment(t, "remedy-drift-webhook"), 0)
	operators := []*procs.Pod{procs.StartPod(t, procs.Deployment(t, "remedy-operator"), 0), procs.StartPod(t, procs.Deployment(t, "remedy-operator"), 1)}
	all := []*procs.Pod{worker, drift, operators[0], operators[1]}

	t.Run("readiness turns true only once caches have synced and the webhook listens", func(t *testing.T) {
		for _, op := range operators {
			var body string
			require.Eventually(t, func() bool {
				var code int
				code, body = procs.Get(op.URL("probes", "/readyz?verbose"))
				return code == 200
			}, 90*time.Second, 100*time.Millisecond, "%s never ready:\n%s", op.Name, op.Out)
			assert.True(t, op.TLSListening("webhook"), "%s ready before its webhook listens", op.Name)
			assert.Contains(t, body, "[+]informers ok", "%s: /readyz waits for the caches", op.Name)
			assert.Contains(t, body, "[+]webhook ok", "%s: /readyz waits for the webhook server", op.Name)
			code, _ := procs.Get(op.URL("probes", "/healthz"))
			assert.Equal(t, 200, code, "%s /healthz", op.Name)
		}
		// The drift webhook's readinessProbe is its TLS port.
		require.Eventually(t, func() bool { return drift.TLSListening("webhook") }, 60*time.Second, 100*time.Millisecond, "drift webhook:\n%s", drift.Out)
	})
	t.Run("the codec server serves TLS with its certificate and reviews tokens", func(t *testing.T) {
		codecServed(t, procs.NewKubectl(t), cas, operators)
	})
	procs.RouteService(t, "remedy-webhook", operators...)
	procs.RouteService(t, "remedy-drift-webhook", drift)
	procs.InjectCABundles(t, cas)
	t.Run("every object under deploy/ is accepted as written", dryRunEveryObject)

	var leader, follower *procs.Pod
	t.Run("one operator replica leads", func(t *testing.T) {
		require.Eventually(t, func() bool {
			leader, follower = nil, nil
			for _, op := range operators {
				if procs.Leads(op) {
					leader = op
				} else {
					follower = op
				}
			}
			return leader != nil && follower != nil
		}, 60*time.Second, 200*time.Millisecond, "no single leader")
	})
	require.NotNil(t, leader)

	kubectl := procs.NewKubectl(t)
	ns := "parity"
	kubectl.Run(t, "create", "namespace", ns)
	kubectl.Run(t, "create", "deployment", "web", "-n", ns, "--image="+release.Image(), "--replicas=1", "--", "/remedy", "demo-app")

	t.Run("a scale execution runs, reconciled by the leader only", func(t *testing.T) {
		kubectl.Apply(t, execution(ns, "scale-web", 3, false))
		kubectl.WaitPhase(t, ns, "scale-web", "RollbackReady", "Completed")
		assert.Equal(t, "3", kubectl.Run(t, "get", "deployment", "web", "-n", ns, "-o", "jsonpath={.spec.replicas}"))
		assert.Positive(t, procs.Reconciles(leader), "the leader reconciled")
		assert.Zero(t, procs.Reconciles(follower), "the follower reconciled nothing")
	})

	t.Run("an approval by kubectl lets the run proceed", func(t *testing.T) {
		kubectl.Apply(t, execution(ns, "scale-approved", 2, true))
		kubectl.WaitPhase(t, ns, "scale-approved", "WaitingApproval")
		patch := `{"status":{"decision":"Approved","decisionMessage":"parity test"}}`
		kubectl.Run(t, "patch", "rar", "scale-approved-approval", "-n", ns, "--subresource=status", "--type=merge", "-p", patch,
			"--as=alice", "--as-group=sre-approvers")
		kubectl.WaitPhase(t, ns, "scale-approved", "RollbackReady", "Completed")
		assert.Equal(t, "2", kubectl.Run(t, "get", "deployment", "web", "-n", ns, "-o", "jsonpath={.spec.replicas}"))
		out, err := kubectl.Try("patch", "rar", "scale-approved-approval", "-n", ns, "--subresource=status", "--type=merge", "-p", patch,
			"--as=mallory", "--as-group=system:authenticated")
		assert.Error(t, err, "someone without the approve verb decided: %s", out)
	})

	t.Run("a frozen parent's child change is denied by the drift webhook", func(t *testing.T) {
		out := kubectl.FrozenChildChange(t, ns, "web", "parity freeze")
		assert.Contains(t, out, "Forbidden")
		assert.Contains(t, out, "parity freeze")
	})

	t.Run("metrics expose every name the docs list", func(t *testing.T) {
		names := readmeMetrics(t)
		bodies := map[string]string{}
		for _, p := range all {
			code, body := procs.Get(p.URL("metrics", "/metrics"))
			require.Equal(t, 200, code, p.Name)
			bodies[p.Name] = body
		}
		later := map[string]bool{}
		for _, name := range metrics.AfterFirstEvent() {
			later[name] = true
		}
		defined := map[string]bool{}
		for _, name := range metrics.Names() {
			defined[name] = true
		}
		for _, name := range names {
			require.True(t, defined[name], "the docs list %s, which Remedy does not define", name)
			if later[name] {
				continue // exposed from its first event on (metrics.AfterFirstEvent)
			}
			found := false
			for _, body := range bodies {
				found = found || regexp.MustCompile(`(?m)^`+name+`(_bucket|_sum|_count)?(\{| )`).MatchString(body)
			}
			assert.True(t, found, "no process exposes %s", name)
		}
		for _, body := range bodies {
			assert.Contains(t, body, "temporal_request", "each process has the Temporal SDK's metrics")
		}
	})

	t.Run("killing the leader hands over within the lease duration", func(t *testing.T) {
		killed := time.Now()
		leader.Kill()
		// The dead pod fails readiness, so the EndpointSlice controller takes
		// it out of the webhook Service; without that no cluster fails over.
		procs.Unroute(t, leader)
		require.Eventually(t, func() bool { return procs.Leads(follower) }, procs.LeaseDuration+10*time.Second, 100*time.Millisecond, "no handover")
		took := time.Since(killed)
		t.Logf("failover took %.1fs (lease %s)", took.Seconds(), procs.LeaseDuration)
		// A follower tries every RetryPeriod (2s) jittered up to 2.2×, sees
		// the last renewal up to one try late and the expiry up to one try
		// late: the lease plus two tries of 4.4s at worst.
		assert.Less(t, took, procs.LeaseDuration+9*time.Second)
		kubectl.Apply(t, execution(ns, "scale-after-failover", 1, false))
		kubectl.WaitPhase(t, ns, "scale-after-failover", "RollbackReady", "Completed")
	})
	t.Run("the install doc's secured-Temporal and scaling commands act on the deployed objects", func(t *testing.T) {
		blocks, err := procs.ParseReadme()
		require.NoError(t, err)
		dir := t.TempDir()
		pair, err := pki.SelfSigned("temporal", []string{"temporal"})
		require.NoError(t, err)
		for name, content := range map[string][]byte{"ca.crt": pair.CertPEM, "tls.crt": pair.CertPEM, "tls.key": pair.KeyPEM} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), content, 0o600))
		}
		require.NoError(t, procs.RunReadme(blocks.TLS, dir))
		require.NoError(t, procs.RunReadme(blocks.Scale, dir))
		// What the Deployments read is what the commands wrote.
		secrets := procs.Clientset(t).CoreV1().Secrets(devenv.Namespace)
		settings, err := secrets.Get(context.Background(), "remedy-temporal", metav1.GetOptions{})
		require.NoError(t, err)
		files, err := secrets.Get(context.Background(), "remedy-temporal-tls", metav1.GetOptions{})
		require.NoError(t, err)
		for _, name := range []string{"remedy-operator", "remedy-worker", "remedy-drift-webhook"} {
			d := procs.Deployment(t, name)
			c := d.Spec.Template.Spec.Containers[0]
			require.NotEmpty(t, c.EnvFrom, name)
			assert.Equal(t, "remedy-temporal", c.EnvFrom[0].SecretRef.Name, name)
			mounted := map[string]string{}
			for _, m := range c.VolumeMounts {
				mounted[m.Name] = m.MountPath
			}
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Secret == nil || v.Secret.SecretName != "remedy-temporal-tls" {
					continue
				}
				for key, path := range settings.Data {
					if strings.HasPrefix(string(path), "/") {
						assert.Equal(t, mounted[v.Name], filepath.Dir(string(path)), "%s: %s points into the mounted Secret", name, key)
						assert.Contains(t, files.Data, filepath.Base(string(path)), "%s: %s names a file of remedy-temporal-tls", name, key)
					}
				}
			}
			restarted := kubectl.Run(t, "get", "deployment", name, "-n", devenv.Namespace, "-o", `jsonpath={.spec.template.metadata.annotations.kubectl\.kubernetes\.io/restartedAt}`)
			assert.NotEmpty(t, restarted, "%s restarted", name)
		}
		assert.Equal(t, "remedy", string(settings.Data["TEMPORAL_NAMESPACE"]))
		assert.Equal(t, "3", kubectl.Run(t, "get", "deployment", "remedy-worker", "-n", devenv.Namespace, "-o", "jsonpath={.spec.replicas}"))
	})
	t.Logf("parity test took %.1fs", time.Since(start).Seconds())
}

func execution(ns, name string, replicas int, approval bool) string {
	a := ""
	if approval {
		a = "\n  approval: {required: true}"
	}
	return fmt.Sprintf(`apiVersion: remedy.dev/v1alpha1
kind: KubernetesExecution
metadata: {name: %s, namespace: %s}
spec:
  action: scale
  target: {apiVersion: apps/v1, kind: Deployment, namespace: %s, name: web}
  parameters: {replicas: %d}
  rollbackWindow: 1s%s
`, name, ns, ns, replicas, a)
}

// readmeMetrics are the remedy_* metric names the docs (README.md and
// docs/*.md) list, with the `_suffix` shorthands expanded against the name
// before them.
func readmeMetrics(t *testing.T) []string {
	paths, err := filepath.Glob(filepath.Join(procs.Root, "docs", "*.md"))
	require.NoError(t, err)
	var raw []byte
	for _, p := range append([]string{filepath.Join(procs.Root, "README.md")}, paths...) {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		raw = append(append(raw, b...), '\n')
	}
	seen := map[string]bool{}
	var names []string
	last := ""
	for _, m := range regexp.MustCompile("`(remedy_[a-z_]+|_[a-z_]+)(?:\\{[^}]*\\})?`").FindAllStringSubmatch(string(raw), -1) {
		name := m[1]
		if strings.HasPrefix(name, "_") {
			require.NotEmpty(t, last, "a suffix %s before any name", name)
			name = last[:strings.LastIndex(strings.TrimSuffix(strings.TrimSuffix(last, "_total"), "_"), "_")] + name
		} else {
			last = name
		}
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	require.Greater(t, len(names), 10)
	return names
}

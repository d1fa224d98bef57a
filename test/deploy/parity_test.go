package deploy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
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
)

// leaseDuration is controller-runtime's default, which the operator keeps.
const leaseDuration = 15 * time.Second

// The three processes of deploy/manager, as written, do Remedy's work with
// only the RBAC deploy/ grants.
func TestDeployedProcesses(t *testing.T) {
	start := time.Now()
	cas := issueCertificates(t)
	worker := startPod(t, deployment(t, "remedy-worker"), 0)
	drift := startPod(t, deployment(t, "remedy-drift-webhook"), 0)
	operators := []*pod{startPod(t, deployment(t, "remedy-operator"), 0), startPod(t, deployment(t, "remedy-operator"), 1)}
	all := []*pod{worker, drift, operators[0], operators[1]}

	t.Run("readiness turns true only once caches have synced and the webhook listens", func(t *testing.T) {
		for _, op := range operators {
			var body string
			require.Eventually(t, func() bool {
				var code int
				code, body = get(op.url("probes", "/readyz?verbose"))
				return code == 200
			}, 90*time.Second, 100*time.Millisecond, "%s never ready:\n%s", op.name, op.out)
			assert.True(t, op.tlsListening("webhook"), "%s ready before its webhook listens", op.name)
			assert.Contains(t, body, "[+]informers ok", "%s: /readyz waits for the caches", op.name)
			assert.Contains(t, body, "[+]webhook ok", "%s: /readyz waits for the webhook server", op.name)
			code, _ := get(op.url("probes", "/healthz"))
			assert.Equal(t, 200, code, "%s /healthz", op.name)
		}
		// The drift webhook's readinessProbe is its TLS port.
		require.Eventually(t, func() bool { return drift.tlsListening("webhook") }, 60*time.Second, 100*time.Millisecond, "drift webhook:\n%s", drift.out)
	})
	routeService(t, "remedy-webhook", operators...)
	routeService(t, "remedy-drift-webhook", drift)
	injectCABundles(t, cas)
	t.Run("every object under deploy/ is accepted as written", dryRunEveryObject)

	var leader, follower *pod
	t.Run("one operator replica leads", func(t *testing.T) {
		require.Eventually(t, func() bool {
			leader, follower = nil, nil
			for _, op := range operators {
				if leads(op) {
					leader = op
				} else {
					follower = op
				}
			}
			return leader != nil && follower != nil
		}, 60*time.Second, 200*time.Millisecond, "no single leader")
	})
	require.NotNil(t, leader)

	kubectl := newKubectl()
	ns := "parity"
	kubectl.run(t, "create", "namespace", ns)
	kubectl.run(t, "create", "deployment", "web", "-n", ns, "--image=nginx:1.27", "--replicas=1")

	t.Run("a scale execution runs, reconciled by the leader only", func(t *testing.T) {
		kubectl.apply(t, execution(ns, "scale-web", 3, false))
		kubectl.waitPhase(t, ns, "scale-web", "RollbackReady", "Completed")
		assert.Equal(t, "3", kubectl.run(t, "get", "deployment", "web", "-n", ns, "-o", "jsonpath={.spec.replicas}"))
		assert.Positive(t, reconciles(leader), "the leader reconciled")
		assert.Zero(t, reconciles(follower), "the follower reconciled nothing")
	})

	t.Run("an approval by kubectl lets the run proceed", func(t *testing.T) {
		kubectl.apply(t, execution(ns, "scale-approved", 2, true))
		kubectl.waitPhase(t, ns, "scale-approved", "WaitingApproval")
		patch := `{"status":{"decision":"Approved","decisionMessage":"parity test"}}`
		kubectl.run(t, "patch", "rar", "scale-approved-approval", "-n", ns, "--subresource=status", "--type=merge", "-p", patch,
			"--as=alice", "--as-group=sre-approvers")
		kubectl.waitPhase(t, ns, "scale-approved", "RollbackReady", "Completed")
		assert.Equal(t, "2", kubectl.run(t, "get", "deployment", "web", "-n", ns, "-o", "jsonpath={.spec.replicas}"))
		out, err := kubectl.try("patch", "rar", "scale-approved-approval", "-n", ns, "--subresource=status", "--type=merge", "-p", patch,
			"--as=mallory", "--as-group=system:authenticated")
		assert.Error(t, err, "someone without the approve verb decided: %s", out)
	})

	t.Run("a frozen parent's child change is denied by the drift webhook", func(t *testing.T) {
		var rs string
		require.Eventually(t, func() bool {
			rs = kubectl.run(t, "get", "rs", "-n", ns, "-l", "app=web", "-o", `jsonpath={.items[0].metadata.name}`)
			return rs != "" && kubectl.run(t, "get", "rs", rs, "-n", ns, "-o", `jsonpath={.metadata.annotations.kausality\.io/updaters}`) != ""
		}, 60*time.Second, 200*time.Millisecond, "the drift webhook never traced the ReplicaSet")
		kubectl.run(t, "annotate", "deployment", "web", "-n", ns, `kausality.io/freeze={"user":"oncall","message":"parity freeze","at":"2026-01-01T00:00:00Z"}`)
		// The webhook reads the parent from its informer cache: the freeze lands within moments.
		var out string
		require.Eventually(t, func() bool {
			var err error
			out, err = kubectl.try("patch", "rs", rs, "-n", ns, "--type=merge", "-p", `{"spec":{"replicas":5}}`)
			return err != nil
		}, 10*time.Second, 200*time.Millisecond, "a person's change to a frozen parent's child was admitted: %s", out)
		assert.Contains(t, out, "Forbidden")
		assert.Contains(t, out, "parity freeze")
	})

	t.Run("metrics expose every name the README lists", func(t *testing.T) {
		names := readmeMetrics(t)
		bodies := map[string]string{}
		for _, p := range all {
			code, body := get(p.url("metrics", "/metrics"))
			require.Equal(t, 200, code, p.name)
			bodies[p.name] = body
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
			require.True(t, defined[name], "README lists %s, which Remedy does not define", name)
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
		leader.kill()
		// The dead pod fails readiness, so the EndpointSlice controller takes
		// it out of the webhook Service; without that no cluster fails over.
		unroute(t, leader)
		require.Eventually(t, func() bool { return leads(follower) }, leaseDuration+10*time.Second, 100*time.Millisecond, "no handover")
		took := time.Since(killed)
		t.Logf("failover took %.1fs (lease %s)", took.Seconds(), leaseDuration)
		// A follower tries every RetryPeriod (2s) jittered up to 2.2×, sees
		// the last renewal up to one try late and the expiry up to one try
		// late: the lease plus two tries of 4.4s at worst.
		assert.Less(t, took, leaseDuration+9*time.Second)
		kubectl.apply(t, execution(ns, "scale-after-failover", 1, false))
		kubectl.waitPhase(t, ns, "scale-after-failover", "RollbackReady", "Completed")
	})
	t.Run("README's secured-Temporal and scaling commands act on the deployed objects", func(t *testing.T) {
		blocks, err := parseReadme()
		require.NoError(t, err)
		dir := t.TempDir()
		pair, err := pki.SelfSigned("temporal", []string{"temporal"})
		require.NoError(t, err)
		for name, content := range map[string][]byte{"ca.crt": pair.CertPEM, "tls.crt": pair.CertPEM, "tls.key": pair.KeyPEM} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), content, 0o600))
		}
		require.NoError(t, runReadme(blocks.tls, dir))
		require.NoError(t, runReadme(blocks.scale, dir))
		// What the Deployments read is what the commands wrote.
		cs := clientset(t)
		settings, err := cs.CoreV1().Secrets(devenv.Namespace).Get(context.Background(), "remedy-temporal", metav1.GetOptions{})
		require.NoError(t, err)
		files, err := cs.CoreV1().Secrets(devenv.Namespace).Get(context.Background(), "remedy-temporal-tls", metav1.GetOptions{})
		require.NoError(t, err)
		for _, name := range []string{"remedy-operator", "remedy-worker", "remedy-drift-webhook"} {
			d := deployment(t, name)
			c := d.Spec.Template.Spec.Containers[0]
			require.NotEmpty(t, c.EnvFrom, name)
			assert.Equal(t, "remedy-temporal", c.EnvFrom[0].SecretRef.Name, name)
			mounted := map[string]string{}
			for _, m := range c.VolumeMounts {
				mounted[m.Name] = m.MountPath
			}
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Secret != nil && v.Secret.SecretName == "remedy-temporal-tls" {
					for key, path := range settings.Data {
						if strings.HasPrefix(string(path), "/") {
							assert.Equal(t, mounted[v.Name], filepath.Dir(string(path)), "%s: %s points into the mounted Secret", name, key)
							assert.Contains(t, files.Data, filepath.Base(string(path)), "%s: %s names a file of remedy-temporal-tls", name, key)
						}
					}
				}
			}
			live, err := cs.AppsV1().Deployments(devenv.Namespace).Get(context.Background(), name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.NotEmpty(t, live.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"], "%s restarted", name)
		}
		assert.Equal(t, "remedy", string(settings.Data["TEMPORAL_NAMESPACE"]))
		assert.Equal(t, "3", kubectl.run(t, "get", "deployment", "remedy-worker", "-n", devenv.Namespace, "-o", "jsonpath={.spec.replicas}"))
	})
	t.Logf("parity test took %.1fs", time.Since(start).Seconds())
}

func leads(p *pod) bool {
	_, body := get(p.url("metrics", "/metrics"))
	return regexp.MustCompile(`(?m)^leader_election_master_status\{name="remedy-operator.remedy.dev"\} 1$`).MatchString(body)
}

// reconciles is the KubernetesExecution controller's reconcile count.
func reconciles(p *pod) int {
	_, body := get(p.url("metrics", "/metrics"))
	total := 0
	for _, m := range regexp.MustCompile(`(?m)^controller_runtime_reconcile_total\{controller="kubernetesexecution",result="[a-z_]+"\} (\d+)$`).FindAllStringSubmatch(body, -1) {
		var n int
		fmt.Sscan(m[1], &n)
		total += n
	}
	return total
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

// readmeMetrics are the remedy_* metric names README lists, with the
// `_suffix` shorthands expanded against the name before them.
func readmeMetrics(t *testing.T) []string {
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
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

// kubectl runs the pinned kubectl as cluster admin (or impersonating with --as).
type kubectlCmd struct{ path, kubeconfig string }

func newKubectl() kubectlCmd {
	return kubectlCmd{path: filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"), kubeconfig: adminKubeconfig}
}

func (k kubectlCmd) try(args ...string) (string, error) {
	cmd := exec.Command(k.path, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (k kubectlCmd) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := k.try(args...)
	require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), out)
	return out
}

func (k kubectlCmd) apply(t *testing.T, manifest string) {
	t.Helper()
	cmd := exec.Command(k.path, "--kubeconfig", k.kubeconfig, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
}

func (k kubectlCmd) waitPhase(t *testing.T, ns, name string, phases ...string) {
	t.Helper()
	var phase string
	require.Eventually(t, func() bool {
		phase, _ = k.try("get", "kubernetesexecutions", name, "-n", ns, "-o", "jsonpath={.status.phase}")
		for _, p := range phases {
			if phase == p {
				return true
			}
		}
		return false
	}, 90*time.Second, 250*time.Millisecond, "%s/%s phase %q, want %v", ns, name, phase, phases)
}

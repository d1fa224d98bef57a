package procs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// LeaseDuration is controller-runtime's default, which the operator keeps.
const LeaseDuration = 15 * time.Second

// Leads says whether p holds the operator's leader lease, by its metrics.
func Leads(p *Pod) bool {
	_, body := Get(p.URL("metrics", "/metrics"))
	return regexp.MustCompile(`(?m)^leader_election_master_status\{name="remedy-operator.remedy.dev"\} 1$`).MatchString(body)
}

// Reconciles is the KubernetesExecution controller's reconcile count.
func Reconciles(p *Pod) int {
	_, body := Get(p.URL("metrics", "/metrics"))
	total := 0
	for _, m := range regexp.MustCompile(`(?m)^controller_runtime_reconcile_total\{controller="kubernetesexecution",result="[a-z_]+"\} (\d+)$`).FindAllStringSubmatch(body, -1) {
		var n int
		fmt.Sscan(m[1], &n)
		total += n
	}
	return total
}

// Kubectl runs the pinned kubectl as cluster admin (or impersonating with --as).
type Kubectl struct{ path, kubeconfig string }

// NewKubectl writes a cluster-admin kubeconfig for the test.
func NewKubectl(t testing.TB) Kubectl {
	path := filepath.Join(t.TempDir(), "admin.kubeconfig")
	require.NoError(t, env.WriteAdminKubeconfig(path))
	return Kubectl{path: filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"), kubeconfig: path}
}

// Try runs kubectl and returns its trimmed output.
func (k Kubectl) Try(args ...string) (string, error) {
	cmd := exec.Command(k.path, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// Run runs kubectl and fails the test if it fails.
func (k Kubectl) Run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := k.Try(args...)
	require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), out)
	return out
}

// Apply applies manifest.
func (k Kubectl) Apply(t testing.TB, manifest string) {
	t.Helper()
	out, err := k.TryInput(manifest, "apply", "-f", "-")
	require.NoError(t, err, "%s", out)
}

// TryInput runs kubectl with input on its stdin and returns its trimmed output.
func (k Kubectl) TryInput(input string, args ...string) (string, error) {
	cmd := exec.Command(k.path, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(input)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// WaitPhase waits for the KubernetesExecution to reach one of phases.
func (k Kubectl) WaitPhase(t testing.TB, ns, name string, phases ...string) {
	t.Helper()
	var phase string
	require.Eventually(t, func() bool {
		phase, _ = k.Try("get", "kubernetesexecutions", name, "-n", ns, "-o", "jsonpath={.status.phase}")
		for _, p := range phases {
			if phase == p {
				return true
			}
		}
		return false
	}, 90*time.Second, 250*time.Millisecond, "%s/%s phase %q, want %v", ns, name, phase, phases)
}

// FrozenChildChange freezes Deployment ns/name (kausality.io/freeze, with
// message) once the drift webhook has traced its ReplicaSet, and returns
// what kubectl says to a person's change of that ReplicaSet. The change
// must be refused: the webhook reads the parent from its informer cache, so
// the freeze lands within moments.
func (k Kubectl) FrozenChildChange(t testing.TB, ns, name, message string) string {
	t.Helper()
	var rs string
	require.Eventually(t, func() bool {
		rs, _ = k.Try("get", "rs", "-n", ns, "-l", "app="+name, "-o", `jsonpath={.items[0].metadata.name}`)
		updaters, _ := k.Try("get", "rs", rs, "-n", ns, "-o", `jsonpath={.metadata.annotations.kausality\.io/updaters}`)
		return rs != "" && updaters != ""
	}, 60*time.Second, 200*time.Millisecond, "the drift webhook never traced the ReplicaSet")
	k.Run(t, "annotate", "deployment", name, "-n", ns, `kausality.io/freeze={"user":"oncall","message":"`+message+`","at":"2026-01-01T00:00:00Z"}`)
	var out string
	require.Eventually(t, func() bool {
		var err error
		out, err = k.Try("patch", "rs", rs, "-n", ns, "--type=merge", "-p", `{"spec":{"replicas":5}}`)
		return err != nil
	}, 10*time.Second, 200*time.Millisecond, "a person's change to a frozen parent's child was admitted: %s", out)
	return out
}

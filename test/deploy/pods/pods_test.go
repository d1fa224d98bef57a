package pods

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/image"
	"github.com/remedy-dev/remedy/internal/release"
	"github.com/remedy-dev/remedy/test/procs"
)

// TestDeployedPods: deploy/, installed by the install doc's procedure as
// written, runs as Pods; the webhooks are served by them through their
// Services; runs complete through the in-cluster worker and in a Job Pod;
// the PodDisruptionBudgets hold and the NetworkPolicies select Remedy's Pods.
// Long: its steps share one installation of deploy/ as Pods, in the install doc's order.
func TestDeployedPods(t *testing.T) {
	ctx := context.Background()
	cs := procs.Clientset(t)
	kubectl := procs.NewKubectl(t)
	deployments := procs.InstalledDeployments(t)
	require.NotEmpty(t, deployments)
	t.Cleanup(func() {
		if t.Failed() {
			for _, d := range deployments {
				out, _ := kubectl.Try("logs", "-n", devenv.Namespace, "-l", "app.kubernetes.io/name="+d.Name, "--prefix", "--tail=40")
				t.Logf("logs of %s:\n%s", d.Name, out)
			}
		}
	})

	// cert-manager's part: the serving certificates the operator's and the
	// drift webhook's Pods mount, and the webhook configurations' caBundle.
	issued := time.Now()
	cas := procs.IssueCertificates(t)
	procs.InjectCABundles(t, cas)
	// The NetworkPolicies, as the install doc applies them.
	kubectl.Run(t, "apply", "-k", filepath.Join(procs.Root, "deploy", "network"))

	// Since the certificates were issued: the Pods that mount them wait for them.
	procs.CheckDeployedPods(t, deployments, issued)

	t.Run("the webhook Services route to the Pods", func(t *testing.T) {
		for _, svc := range []string{"remedy-webhook", "remedy-drift-webhook"} {
			s, err := cs.CoreV1().Services(devenv.Namespace).Get(ctx, svc, metav1.GetOptions{})
			require.NoError(t, err)
			want := map[string]bool{}
			pods, err := cs.CoreV1().Pods(devenv.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(s.Spec.Selector).String()})
			require.NoError(t, err)
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
					want[p.Status.PodIP] = true
				}
			}
			require.Len(t, want, 2, "%s selects two Pods", svc)
			var got map[string]bool
			require.Eventually(t, func() bool {
				got = readyEndpoints(ctx, t, svc)
				return fmt.Sprint(got) == fmt.Sprint(want)
			}, 30*time.Second, 200*time.Millisecond, "%s's EndpointSlices", svc)
			t.Logf("%s -> %v", svc, sortedKeys(got))
		}
	})

	t.Run("the policy webhook in the operator's Pods refuses a broken policy", func(t *testing.T) {
		// failurePolicy Ignore: an unreachable webhook would admit it; only
		// a served one refuses. Server-side dry run: nothing is stored.
		out, err := kubectl.TryInput(`apiVersion: v1
kind: ConfigMap
metadata: {name: broken-policy, namespace: `+devenv.Namespace+`, labels: {remedy.dev/policy: "true"}}
data: {broken.rego: "package remedy.safety\ndeny contains msg if {"}
`, "create", "--dry-run=server", "-o", "name", "-f", "-")
		require.Error(t, err, "a broken policy was admitted: %s", out)
		assert.Contains(t, out, `admission webhook "policy-configmaps.remedy.dev" denied the request`)
	})

	ns := "pods"
	kubectl.Run(t, "create", "namespace", ns)
	kubectl.Apply(t, procs.DemoDeployment(ns, "web", 1))
	procs.WaitAvailable(t, ns, "web", 1)

	t.Run("a frozen parent's child change is denied by the drift webhook's Pods", func(t *testing.T) {
		out := kubectl.FrozenChildChange(t, ns, "web", "pods freeze")
		// failurePolicy Ignore again: the refusal is the Pods' own.
		assert.Contains(t, out, `admission webhook "drift.remedy.dev" denied the request`)
		assert.Contains(t, out, "pods freeze")
		kubectl.Run(t, "annotate", "deployment", "web", "-n", ns, "kausality.io/freeze-")
	})

	t.Run("a KubernetesExecution completes through the in-cluster worker", func(t *testing.T) {
		procs.Scale(t, kubectl, ns, "scale-web", "inline", 2)
		workers := map[string]bool{}
		for _, p := range procs.RunningPods(t, deploymentNamed(t, deployments, "remedy-worker")) {
			workers[p.Name] = true
		}
		wid := kubectl.Run(t, "get", "kubernetesexecution", "scale-web", "-n", ns, "-o", "jsonpath={.status.workflowID}")
		ran := activityIdentities(t, wid)
		require.NotEmpty(t, ran)
		for _, id := range ran {
			// The SDK's default identity is pid@hostname: a Pod's hostname is its name.
			parts := strings.Split(id, "@")
			require.GreaterOrEqual(t, len(parts), 2, id)
			assert.True(t, workers[parts[1]], "activity ran by %q, not a worker Pod %v", id, sortedKeys(workers))
		}
	})

	t.Run("a Job-executor run completes in a Pod running remedy exec", func(t *testing.T) {
		procs.Scale(t, kubectl, ns, "scale-by-job", "job", 3)
		job := kubectl.Run(t, "get", "kubernetesexecution", "scale-by-job", "-n", ns, "-o", "jsonpath={.status.executionResults.jobName}")
		require.NotEmpty(t, job)
		pods, err := cs.CoreV1().Pods(devenv.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
		require.NoError(t, err)
		require.NotEmpty(t, pods.Items, "the Job's Pod")
		p := pods.Items[0]
		assert.Equal(t, corev1.PodSucceeded, p.Status.Phase)
		assert.Equal(t, devenv.NodeName, p.Spec.NodeName)
		assert.Equal(t, release.Image(), p.Spec.Containers[0].Image)
		assert.Equal(t, []string{image.Binary, "exec"}, p.Spec.Containers[0].Command)
		// No cluster DNS here: the Pod asked the gate where the install doc's
		// exec gate overlay points it, on the node's IP (procs.ExecGateURL).
		gate := map[string]string{}
		for _, e := range p.Spec.Containers[0].Env {
			gate[e.Name] = e.Value
		}
		require.NotEmpty(t, procs.ExecGateURL())
		assert.Equal(t, procs.ExecGateURL(), gate[execution.ExecGateURLEnv])
		jobPod = &p
	})

	t.Run("the NetworkPolicies select Remedy's Pods", func(t *testing.T) { checkNetworkPolicies(t, deployments) })

	t.Run("the PodDisruptionBudgets allow one disruption and refuse the next", func(t *testing.T) {
		pdbs, err := cs.PolicyV1().PodDisruptionBudgets(devenv.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=remedy"})
		require.NoError(t, err)
		require.Len(t, pdbs.Items, len(deployments), "a PodDisruptionBudget per Deployment")
		for _, pdb := range pdbs.Items {
			var got policyv1.PodDisruptionBudget
			require.Eventually(t, func() bool {
				p, err := cs.PolicyV1().PodDisruptionBudgets(devenv.Namespace).Get(ctx, pdb.Name, metav1.GetOptions{})
				if err != nil {
					return false
				}
				got = *p
				return p.Status.ObservedGeneration == p.Generation && p.Status.ExpectedPods == 2 && p.Status.CurrentHealthy == 2
			}, 30*time.Second, 200*time.Millisecond, "%s status", pdb.Name)
			assert.Equal(t, int32(1), got.Status.DisruptionsAllowed, "%s: two healthy, one must stay", pdb.Name)
		}
		// The worker's: evicting both its Pods at once leaves none, so the second is refused.
		pods := procs.RunningPods(t, deploymentNamed(t, deployments, "remedy-worker"))
		require.Len(t, pods, 2)
		evict := func(p corev1.Pod) error {
			return cs.CoreV1().Pods(devenv.Namespace).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
		}
		require.NoError(t, evict(pods[0]), "the first eviction is within the budget")
		err = evict(pods[1])
		require.Error(t, err, "the second eviction would leave no worker")
		assert.True(t, apierrors.IsTooManyRequests(err), "%v", err)
		assert.Contains(t, err.Error(), "disruption budget")
		w := deploymentNamed(t, deployments, "remedy-worker")
		require.Eventually(t, func() bool {
			d, err := cs.AppsV1().Deployments(devenv.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
			return err == nil && procs.RolledOut(d)
		}, procs.ReadyTimeout, 250*time.Millisecond, "the worker's replacement Pod never became Ready")
	})
}

// jobPod is the Job executor's Pod, for the NetworkPolicy check.
var jobPod *corev1.Pod

func deploymentNamed(t *testing.T, ds []appsv1.Deployment, name string) appsv1.Deployment {
	t.Helper()
	for _, d := range ds {
		if d.Name == name {
			return d
		}
	}
	require.FailNow(t, "no Deployment "+name)
	return appsv1.Deployment{}
}

// readyEndpoints are the ready addresses of svc's EndpointSlices.
func readyEndpoints(ctx context.Context, t *testing.T, svc string) map[string]bool {
	slices, err := procs.Clientset(t).DiscoveryV1().EndpointSlices(devenv.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	require.NoError(t, err)
	got := map[string]bool{}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				for _, a := range e.Addresses {
					got[a] = true
				}
			}
		}
	}
	return got
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// activityIdentities are the identities of the workers that started the
// run's activities, from its Temporal history.
func activityIdentities(t *testing.T, workflowID string) []string {
	t.Helper()
	require.NotEmpty(t, workflowID)
	it := procs.Env().Temporal.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var ids []string
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil {
			ids = append(ids, a.GetIdentity())
		}
	}
	return ids
}

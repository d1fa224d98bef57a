package pods

import (
	"context"
	"maps"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/procs"
)

// checkNetworkPolicies: deploy/network's policies exist and select what
// they say. Whether traffic is dropped cannot be checked here: the node's
// bridge CNI does not enforce NetworkPolicy (docs/operate.md says so).
// Long: one case per NetworkPolicy of deploy/network, over the same Pods.
func checkNetworkPolicies(t *testing.T, deployments []appsv1.Deployment) {
	ctx := context.Background()
	cs := procs.Clientset(t)
	components := map[string]bool{}
	served := map[string]bool{}
	for _, d := range deployments {
		for _, p := range procs.RunningPods(t, d) {
			components[p.Name] = true
			for _, port := range p.Spec.Containers[0].Ports {
				served[port.Name] = true
			}
		}
	}
	require.NotNil(t, jobPod, "the Job executor's Pod ran")
	all, err := cs.CoreV1().Pods(devenv.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	ns, err := cs.CoreV1().Namespaces().Get(ctx, devenv.Namespace, metav1.GetOptions{})
	require.NoError(t, err)
	selects := func(sel metav1.LabelSelector) map[string]bool {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		require.NoError(t, err)
		out := map[string]bool{}
		for _, p := range all.Items {
			if s.Matches(labels.Set(p.Labels)) {
				out[p.Name] = true
			}
		}
		return out
	}
	everyPod := map[string]bool{}
	for _, p := range all.Items {
		everyPod[p.Name] = true
	}
	for _, o := range procs.Manifests(t, filepath.Join("deploy", "network", "*.yaml")) {
		if o["kind"] != "NetworkPolicy" {
			continue
		}
		var np networkingv1.NetworkPolicy
		require.NoError(t, procs.Convert(o, &np))
		_, err := cs.NetworkingV1().NetworkPolicies(np.Namespace).Get(ctx, np.Name, metav1.GetOptions{})
		require.NoError(t, err, "%s installed", np.Name)
		switch np.Name {
		case "remedy-default-deny-ingress":
			assert.Equal(t, everyPod, selects(np.Spec.PodSelector), "denies ingress to every Pod of %s, the Job's too", devenv.Namespace)
			assert.Empty(t, np.Spec.Ingress)
		case "remedy-serving":
			assert.Equal(t, components, selects(np.Spec.PodSelector), "opens the components' ports, not the Job Pod's")
			allowed := map[string]bool{}
			for _, r := range np.Spec.Ingress {
				for _, port := range r.Ports {
					allowed[port.Port.String()] = true
				}
			}
			want := maps.Clone(served)
			delete(want, "exec-gate") // remedy-exec-gate's
			delete(want, "codec")     // remedy-codec's
			assert.Equal(t, want, allowed, "exactly the ports the components declare")
		case "remedy-exec-gate":
			workers := map[string]bool{}
			for _, p := range procs.RunningPods(t, deploymentNamed(t, deployments, "remedy-worker")) {
				workers[p.Name] = true
			}
			assert.Equal(t, workers, selects(np.Spec.PodSelector), "the worker's Pods serve the exec gate")
			require.Len(t, np.Spec.Ingress, 1)
			require.Len(t, np.Spec.Ingress[0].From, 1)
			assert.Equal(t, map[string]bool{jobPod.Name: true}, selects(*np.Spec.Ingress[0].From[0].PodSelector), "only the Job's Pod asks it")
		case "remedy-codec":
			operators := map[string]bool{}
			for _, p := range procs.RunningPods(t, deploymentNamed(t, deployments, "remedy-operator")) {
				operators[p.Name] = true
			}
			assert.Equal(t, operators, selects(np.Spec.PodSelector), "the operator's Pods serve the codec server")
			require.Len(t, np.Spec.Ingress, 1)
			for _, from := range np.Spec.Ingress[0].From {
				require.NotNil(t, from.NamespaceSelector, "people come from another namespace (their ingress)")
				nsSel, err := metav1.LabelSelectorAsSelector(from.NamespaceSelector)
				require.NoError(t, err)
				assert.False(t, nsSel.Matches(labels.Set(ns.Labels)), "no Pod of %s reaches it, the Job's neither", devenv.Namespace)
			}
		case "temporal-frontend":
			require.Len(t, np.Spec.Ingress, 1)
			require.Len(t, np.Spec.Ingress[0].From, 1)
			from := np.Spec.Ingress[0].From[0]
			nsSel, err := metav1.LabelSelectorAsSelector(from.NamespaceSelector)
			require.NoError(t, err)
			assert.True(t, nsSel.Matches(labels.Set(ns.Labels)), "admits %s", devenv.Namespace)
			assert.Equal(t, components, selects(*from.PodSelector), "only the components reach Temporal, not the Job Pod")
			// Its own selector names temporal-dev.yaml's Pods; here Temporal runs on the host.
		default:
			t.Errorf("NetworkPolicy %s: what should it select?", np.Name)
		}
	}
}

// Package deploy_test checks that the manifests under deploy/ agree with
// each other, so a renamed label or port cannot silently open or close a path.
package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/remedy-dev/remedy/activities/execution"
)

const remedyNamespace = "remedy-system"

// Only Remedy's own Deployments (deploy/manager) reach the Temporal frontend
// of temporal-dev.yaml, and only on its gRPC port.
func TestTemporalFrontendPolicy(t *testing.T) {
	remedy := deployments(t, filepath.Join("manager", "*.yaml"))
	require.Len(t, remedy, 3, "operator, worker and drift webhook")
	temporal := deployments(t, filepath.Join("..", "temporal-dev.yaml"))
	require.Len(t, temporal, 1)
	frontend := temporal[0]
	policy := networkPolicies(t)["temporal-frontend"]
	require.NotNil(t, policy, "deploy/network has the temporal-frontend NetworkPolicy")

	assert.Equal(t, frontend.Namespace, policy.Namespace, "the policy lives beside the Temporal frontend")
	assert.True(t, selects(t, policy.Spec.PodSelector, frontend.Spec.Template.Labels), "the policy selects the Temporal frontend's pods %v", frontend.Spec.Template.Labels)
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, policy.Spec.PolicyTypes)
	require.Len(t, policy.Spec.Ingress, 1)
	rule := policy.Spec.Ingress[0]

	require.Len(t, rule.Ports, 1, "only the gRPC port")
	assert.Equal(t, int32(7233), rule.Ports[0].Port.IntVal)
	assert.Contains(t, containerPorts(frontend), rule.Ports[0].Port.IntVal, "temporal-dev serves gRPC on the allowed port")

	require.NotEmpty(t, rule.From, "an empty from admits every source")
	allowed := func(ns string, podLabels map[string]string) bool {
		nsLabels := map[string]string{"kubernetes.io/metadata.name": ns}
		for _, peer := range rule.From {
			require.Nil(t, peer.IPBlock, "no address ranges: pods are chosen by label")
			require.NotNil(t, peer.NamespaceSelector, "every peer names its namespace")
			require.NotNil(t, peer.PodSelector, "every peer names its pods")
			if selects(t, *peer.NamespaceSelector, nsLabels) && selects(t, *peer.PodSelector, podLabels) {
				return true
			}
		}
		return false
	}
	for _, d := range remedy {
		assert.Equal(t, remedyNamespace, d.Namespace)
		assert.True(t, allowed(d.Namespace, d.Spec.Template.Labels), "%s reaches Temporal", d.Name)
		assert.False(t, allowed("tenant-a", d.Spec.Template.Labels), "%s's labels in another namespace do not", d.Name)
	}
	for name, podLabels := range map[string]map[string]string{
		"an executor Job's pod (remedy exec)": execPodLabels(),
		"any pod part of Remedy":              {"app.kubernetes.io/part-of": "remedy"},
		"temporal-dev itself":                 frontend.Spec.Template.Labels,
		"an unlabelled pod":                   {},
	} {
		assert.False(t, allowed(remedyNamespace, podLabels), "%s does not reach Temporal", name)
	}
}

// remedy-system admits nothing by default; Remedy's pods admit exactly the
// ports they declare (webhooks, metrics, probes), and executor pods nothing.
func TestRemedyNamespacePolicies(t *testing.T) {
	policies := networkPolicies(t)
	deny := policies["remedy-default-deny-ingress"]
	require.NotNil(t, deny)
	assert.Equal(t, remedyNamespace, deny.Namespace)
	assert.Empty(t, deny.Spec.PodSelector.MatchLabels)
	assert.Empty(t, deny.Spec.PodSelector.MatchExpressions)
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, deny.Spec.PolicyTypes)
	assert.Empty(t, deny.Spec.Ingress)

	serving := policies["remedy-serving"]
	require.NotNil(t, serving)
	assert.Equal(t, remedyNamespace, serving.Namespace)
	require.Len(t, serving.Spec.Ingress, 1)
	allowedNames := map[string]bool{}
	for _, p := range serving.Spec.Ingress[0].Ports {
		require.NotEmpty(t, p.Port.StrVal, "ports by container port name, so a renumbered port stays covered")
		allowedNames[p.Port.StrVal] = true
	}
	declared := map[string]bool{}
	for _, d := range deployments(t, filepath.Join("manager", "*.yaml")) {
		assert.True(t, selects(t, serving.Spec.PodSelector, d.Spec.Template.Labels), "remedy-serving selects %s", d.Name)
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, p := range c.Ports {
				if p.Name == execGatePort || p.Name == codecPort {
					continue // TestExecGatePolicy, TestCodecPolicy
				}
				declared[p.Name] = true
				assert.True(t, allowedNames[p.Name], "%s's port %s (%d) is admitted", d.Name, p.Name, p.ContainerPort)
			}
		}
	}
	for name := range allowedNames {
		assert.True(t, declared[name], "admitted port %q is declared by a Remedy container", name)
	}
	assert.False(t, selects(t, serving.Spec.PodSelector, execPodLabels()), "executor pods admit nothing")
	assert.False(t, selects(t, serving.Spec.PodSelector, deployments(t, filepath.Join("..", "temporal-dev.yaml"))[0].Spec.Template.Labels),
		"temporal-dev is admitted only by temporal-frontend")
}

const execGatePort = "exec-gate"

// The worker's exec gate admits the executor Jobs' Pods only, on its own port.
func TestExecGatePolicy(t *testing.T) {
	policy := networkPolicies(t)["remedy-exec-gate"]
	require.NotNil(t, policy, "deploy/network has the remedy-exec-gate NetworkPolicy")
	assert.Equal(t, remedyNamespace, policy.Namespace)
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, policy.Spec.PolicyTypes)
	require.Len(t, policy.Spec.Ingress, 1)
	rule := policy.Spec.Ingress[0]
	require.Len(t, rule.Ports, 1)
	assert.Equal(t, execGatePort, rule.Ports[0].Port.StrVal)
	require.Len(t, rule.From, 1)
	peer := rule.From[0]
	require.NotNil(t, peer.PodSelector)
	assert.Nil(t, peer.NamespaceSelector, "the policy's own namespace only")
	assert.Nil(t, peer.IPBlock)
	assert.True(t, selects(t, *peer.PodSelector, execPodLabels()), "an executor Job's pod asks the gate")
	for _, d := range deployments(t, filepath.Join("manager", "*.yaml")) {
		assert.False(t, selects(t, *peer.PodSelector, d.Spec.Template.Labels), "%s does not reach the exec gate", d.Name)
		serves := false
		for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
			serves = serves || p.Name == execGatePort
		}
		assert.Equal(t, serves, selects(t, policy.Spec.PodSelector, d.Spec.Template.Labels), "%s is selected iff it serves the exec gate", d.Name)
	}
	assert.False(t, selects(t, *peer.PodSelector, map[string]string{"app.kubernetes.io/part-of": "remedy"}), "part of Remedy is not enough")
}

const (
	codecPort = "codec"
	// codecClients labels the namespaces remedy-codec admits (deploy/network/codec.yaml).
	codecClients = "remedy.dev/codec-clients"
)

// The operator's codec server admits, on its own port, only pods of
// namespaces labelled remedy.dev/codec-clients=true (where people's browsers
// and CLIs come in): not Remedy's other pods, not executor pods, not tenants.
func TestCodecPolicy(t *testing.T) {
	policy := networkPolicies(t)["remedy-codec"]
	require.NotNil(t, policy, "deploy/network has the remedy-codec NetworkPolicy")
	assert.Equal(t, remedyNamespace, policy.Namespace)
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, policy.Spec.PolicyTypes)
	require.Len(t, policy.Spec.Ingress, 1)
	rule := policy.Spec.Ingress[0]
	require.Len(t, rule.Ports, 1, "only the codec port")
	assert.Equal(t, codecPort, rule.Ports[0].Port.StrVal, "by container port name")
	require.NotEmpty(t, rule.From, "an empty from admits every source")
	admitted := func(nsLabels, podLabels map[string]string) bool {
		for _, peer := range rule.From {
			require.Nil(t, peer.IPBlock)
			require.NotNil(t, peer.NamespaceSelector, "a peer without a namespace selector is the policy's own namespace")
			pods := metav1.LabelSelector{}
			if peer.PodSelector != nil {
				pods = *peer.PodSelector
			}
			if selects(t, *peer.NamespaceSelector, nsLabels) && selects(t, pods, podLabels) {
				return true
			}
		}
		return false
	}
	ns := func(name string, extra ...string) map[string]string {
		l := map[string]string{"kubernetes.io/metadata.name": name}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return l
	}
	assert.True(t, admitted(ns("ingress-nginx", codecClients, "true"), map[string]string{"app.kubernetes.io/name": "ingress-nginx"}), "a labelled namespace's pods reach it")
	assert.False(t, admitted(ns("ingress-nginx"), map[string]string{"app.kubernetes.io/name": "ingress-nginx"}), "an unlabelled namespace's do not")
	assert.False(t, admitted(ns("tenant-a", codecClients, "false"), map[string]string{}), "nor one labelled otherwise")
	assert.False(t, admitted(ns(remedyNamespace), execPodLabels()), "executor pods do not")
	for _, d := range deployments(t, filepath.Join("manager", "*.yaml")) {
		assert.False(t, admitted(ns(remedyNamespace), d.Spec.Template.Labels), "%s does not", d.Name)
		serves := false
		for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
			serves = serves || p.Name == codecPort
		}
		assert.Equal(t, serves, selects(t, policy.Spec.PodSelector, d.Spec.Template.Labels), "%s is selected iff it serves the codec server", d.Name)
		assert.Equal(t, d.Name == "remedy-operator", serves, "the operator serves the codec server")
	}
}

// Every manifest in deploy/network is in its kustomization.
func TestNetworkKustomization(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("network", "kustomization.yaml"))
	require.NoError(t, err)
	var k struct{ Resources []string }
	require.NoError(t, yaml.Unmarshal(raw, &k))
	files, err := filepath.Glob(filepath.Join("network", "*.yaml"))
	require.NoError(t, err)
	var want []string
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			want = append(want, filepath.Base(f))
		}
	}
	assert.ElementsMatch(t, want, k.Resources)
}

// execPodLabels are the labels the worker puts on executor Jobs' pods.
func execPodLabels() map[string]string {
	return map[string]string{
		execution.LabelPartOf: "remedy", execution.LabelAction: "restart",
		execution.LabelExecutionName: "x", execution.LabelExecutionNamespace: "tenant-a", execution.LabelExecutionUID: "uid",
	}
}

func selects(t *testing.T, sel metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(&sel)
	require.NoError(t, err)
	return s.Matches(labels.Set(l))
}

func containerPorts(d appsv1.Deployment) []int32 {
	var ports []int32
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			ports = append(ports, p.ContainerPort)
		}
	}
	return ports
}

func deployments(t *testing.T, glob string) []appsv1.Deployment {
	var out []appsv1.Deployment
	for _, o := range objects(t, glob, "Deployment") {
		var d appsv1.Deployment
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o, &d, true))
		out = append(out, d)
	}
	return out
}

func networkPolicies(t *testing.T) map[string]*networkingv1.NetworkPolicy {
	out := map[string]*networkingv1.NetworkPolicy{}
	for _, o := range objects(t, filepath.Join("network", "*.yaml"), "NetworkPolicy") {
		var p networkingv1.NetworkPolicy
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o, &p, true))
		out[p.Name] = &p
	}
	return out
}

// objects decodes the documents of kind in the files matching glob.
func objects(t *testing.T, glob, kind string) []map[string]any {
	t.Helper()
	files, err := filepath.Glob(glob)
	require.NoError(t, err)
	require.NotEmpty(t, files, glob)
	var out []map[string]any
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			var o map[string]any
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, f)
			if o["kind"] == kind {
				out = append(out, o)
			}
		}
	}
	return out
}

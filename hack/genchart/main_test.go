package main

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/remedy-dev/remedy/internal/install"
	"github.com/remedy-dev/remedy/internal/release"
)

const root = "../.."

var chartDir = filepath.Join(root, "deploy", "helm", "remedy")

// deploy/helm/remedy must be what deploy/ generates: run `make manifests`
// after changing deploy/.
func TestChartIsGenerated(t *testing.T) {
	want, err := Files(root)
	require.NoError(t, err)
	got := map[string][]byte{}
	require.NoError(t, filepath.WalkDir(chartDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		rel, _ := filepath.Rel(chartDir, path)
		got[filepath.ToSlash(rel)] = raw
		return err
	}))
	assert.ElementsMatch(t, keys(want), keys(got), "the chart has extra or missing files: run make manifests")
	for name, content := range want {
		assert.Equal(t, string(content), string(got[name]), "%s is stale: run make manifests", name)
	}
}

// The chart rendered with its defaults, as `helm template` renders it with
// the Helm SDK, is the objects README's kubectl install applies, and its
// CRDs are deploy/crd's.
func TestChartRendersDeploy(t *testing.T) {
	objs, crds := render(t, nil)
	var want []install.Object
	for _, p := range install.Parts {
		o, err := install.Render(root, p)
		require.NoError(t, err)
		want = append(want, o...)
	}
	assert.Equal(t, byName(want), byName(objs))
	deployCRDs, err := install.Render(root, install.CRDs)
	require.NoError(t, err)
	assert.Equal(t, byName(deployCRDs), byName(crds))
}

// Every value reaches the objects it is for.
func TestChartValues(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	objs, _ := render(t, map[string]any{
		"image":           map[string]any{"repository": "registry.example/remedy", "tag": "v9.9.9", "digest": digest},
		"temporal":        map[string]any{"address": "temporal.example:7233", "namespace": "remedy", "tls": map[string]any{"enabled": true, "secretName": "my-tls", "serverName": "temporal.internal"}},
		"webhookClientCA": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
		"operator":        map[string]any{"replicas": 3, "resources": map[string]any{"limits": map[string]any{"memory": "1Gi"}}},
		"worker":          map[string]any{"replicas": 5},
		"driftWebhook":    map[string]any{"replicas": 4},
		"payloadKeys":     map[string]any{"active": "k2", "keys": map[string]any{"k1": "AQE=", "k2": "AgI="}},
	})
	image := "registry.example/remedy:v9.9.9@" + digest
	all := fmt.Sprint(objs)
	assert.NotContains(t, all, release.Repository, "no reference to the default image is left")
	assert.Equal(t, 5, strings.Count(all, image), "three Deployments, --exec-image and the exec-image ConfigMap")

	find := func(kind, name string) install.Object {
		for _, o := range objs {
			if o["kind"] == kind && o["metadata"].(map[string]any)["name"] == name {
				return o
			}
		}
		require.Failf(t, "missing", "%s %s", kind, name)
		return nil
	}
	for name, replicas := range map[string]int64{"remedy-operator": 3, "remedy-worker": 5, "remedy-drift-webhook": 4} {
		d := find("Deployment", name)
		spec := d["spec"].(map[string]any)
		assert.EqualValues(t, replicas, spec["replicas"], name)
		pod := spec["template"].(map[string]any)["spec"].(map[string]any)
		c := pod["containers"].([]any)[0].(map[string]any)
		assert.Contains(t, c["args"], "--temporal-address=temporal.example:7233", name)
		assert.Contains(t, fmt.Sprint(pod["volumes"]), "secretName:my-tls", name)
		if name == "remedy-operator" {
			// Helm merges values: the limit is the given one, the requests the defaults.
			assert.Equal(t, map[string]any{"limits": map[string]any{"memory": "1Gi"}, "requests": map[string]any{"cpu": "50m", "memory": "64Mi"}}, c["resources"])
		}
	}
	ca := find("Secret", "remedy-webhook-client-ca")
	assert.Equal(t, base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")), ca["data"].(map[string]any)["ca.crt"])
	keys := find("Secret", "remedy-payload-keys")
	assert.Equal(t, map[string]any{"active": base64.StdEncoding.EncodeToString([]byte("k2")), "k1": "AQE=", "k2": "AgI="}, keys["data"])
	settings := find("Secret", "remedy-temporal")
	assert.Equal(t, map[string]any{
		"TEMPORAL_NAMESPACE":   "remedy",
		"TEMPORAL_TLS_CA":      "/etc/remedy/temporal-tls/ca.crt",
		"TEMPORAL_TLS_CERT":    "/etc/remedy/temporal-tls/tls.crt",
		"TEMPORAL_TLS_KEY":     "/etc/remedy/temporal-tls/tls.key",
		"TEMPORAL_SERVER_NAME": "temporal.internal",
	}, settings["stringData"])
}

// render renders the chart with vals as `helm template --include-crds`
// does, returning the templates' objects and the CRDs apart.
func render(t *testing.T, vals map[string]any) (objs, crds []install.Object) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	require.NoError(t, err)
	inst := action.NewInstall(&action.Configuration{})
	inst.ClientOnly, inst.DryRun, inst.Replace = true, true, true
	inst.ReleaseName, inst.Namespace = "remedy", "default"
	// The Kubernetes the tests run (hack/tools/versions.env).
	inst.KubeVersion, err = chartutil.ParseKubeVersion("v1.36.0")
	require.NoError(t, err)
	rel, err := inst.Run(ch, vals)
	require.NoError(t, err)
	objs, err = install.Decode([]byte(rel.Manifest))
	require.NoError(t, err)
	for _, c := range ch.CRDObjects() {
		o, err := install.Decode(c.File.Data)
		require.NoError(t, err)
		crds = append(crds, o...)
	}
	return objs, crds
}

// byName keys objects by kind, namespace and name.
func byName(objs []install.Object) map[string]install.Object {
	out := map[string]install.Object{}
	for _, o := range objs {
		m := o["metadata"].(map[string]any)
		out[fmt.Sprintf("%s %v/%v", o["kind"], m["namespace"], m["name"])] = o
	}
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// With networkPolicies.enabled the chart renders deploy/network's
// NetworkPolicies as `kubectl apply -k deploy/network` applies them; by
// default none, as the install procedure applies none.
func TestChartNetworkPolicies(t *testing.T) {
	policies := func(objs []install.Object) map[string]install.Object {
		out := map[string]install.Object{}
		for k, o := range byName(objs) {
			if o["kind"] == "NetworkPolicy" {
				out[k] = o
			}
		}
		return out
	}
	objs, _ := render(t, nil)
	assert.Empty(t, policies(objs))
	objs, _ = render(t, map[string]any{"networkPolicies": map[string]any{"enabled": true}})
	want, err := install.Render(root, network)
	require.NoError(t, err)
	require.NotEmpty(t, want)
	assert.Equal(t, byName(want), policies(objs))
	assert.Contains(t, policies(objs), "NetworkPolicy remedy-system/remedy-codec")
}

// codec.enabled removes exactly the codec server: its Service, Certificate
// and NetworkPolicy, and the operator's codec args, port, mount and volume;
// its other values reach the operator's flags and the NetworkPolicy.
func TestChartCodecValues(t *testing.T) {
	on := map[string]any{"networkPolicies": map[string]any{"enabled": true}}
	withCodec, _ := render(t, on)
	withoutCodec, _ := render(t, map[string]any{"networkPolicies": map[string]any{"enabled": true}, "codec": map[string]any{"enabled": false}})
	with, without := byName(withCodec), byName(withoutCodec)
	for _, k := range []string{"Service", "Certificate", "NetworkPolicy"} {
		key := k + " remedy-system/" + codecName
		assert.Contains(t, with, key)
		assert.NotContains(t, without, key)
		delete(with, key)
	}
	opKey := "Deployment remedy-system/remedy-operator"
	op := deepCopy(with[opKey])
	pod := op["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	c := pod["containers"].([]any)[0].(map[string]any)
	removed := 0
	drop := func(list []any) []any {
		var out []any
		for _, item := range list {
			if codecItem(item) {
				removed++
				continue
			}
			out = append(out, item)
		}
		return out
	}
	c["args"], c["ports"], c["volumeMounts"] = drop(c["args"].([]any)), drop(c["ports"].([]any)), drop(c["volumeMounts"].([]any))
	pod["volumes"] = drop(pod["volumes"].([]any))
	assert.Equal(t, 6, removed, "three flags, the port, the mount and the volume")
	with[opKey] = op
	assert.Equal(t, with, without, "nothing else changes")

	objs, _ := render(t, map[string]any{
		"networkPolicies": map[string]any{"enabled": true},
		"codec": map[string]any{
			"allowedOrigins": []any{"https://temporal-ui.example.com", "http://localhost:8233"},
			"networkPolicy": map[string]any{"from": []any{map[string]any{
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "ingress-nginx"}},
				"podSelector":       map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "ingress-nginx"}},
			}}},
		},
	})
	got := byName(objs)
	args := got[opKey]["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"]
	assert.Contains(t, args, "--codec-allowed-origins=https://temporal-ui.example.com,http://localhost:8233")
	assert.Contains(t, args, "--codec-addr=:8091")
	defaultArgs := byName(withCodec)[opKey]["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"]
	assert.NotContains(t, fmt.Sprint(defaultArgs), "--codec-allowed-origins", "no origin by default")
	rule := got["NetworkPolicy remedy-system/"+codecName]["spec"].(map[string]any)["ingress"].([]any)[0].(map[string]any)
	assert.Equal(t, []any{map[string]any{
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "ingress-nginx"}},
		"podSelector":       map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "ingress-nginx"}},
	}}, rule["from"])
	assert.Equal(t, []any{map[string]any{"port": "codec", "protocol": "TCP"}}, rule["ports"], "the port stays deploy/'s")
}

// execGate.url sets the worker's --exec-gate-url, which the job executor's
// Pods are handed, and execGate's names go into the Certificate they verify
// the gate with; by default the worker keeps its own URL (the Service's DNS
// name). codec's names go into the codec server's Certificate.
func TestChartExecGateURL(t *testing.T) {
	workerArgs := func(objs []install.Object) []any {
		d := byName(objs)["Deployment remedy-system/remedy-worker"]
		return d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"].([]any)
	}
	objs, _ := render(t, nil)
	base := workerArgs(objs)
	assert.NotContains(t, fmt.Sprint(base), "--exec-gate-url", "the default is the worker's")
	certSpec := func(objs []install.Object, name string) map[string]any {
		return byName(objs)["Certificate remedy-system/"+name]["spec"].(map[string]any)
	}
	baseCert := certSpec(objs, "remedy-worker-gate")
	assert.NotContains(t, baseCert, "ipAddresses")

	const url = "https://10.0.0.7:9444/exec-gate"
	objs, _ = render(t, map[string]any{"execGate": map[string]any{"url": url, "ipAddresses": []any{"10.0.0.7"}, "dnsNames": []any{"gate.example"}}})
	args := workerArgs(objs)
	assert.Contains(t, args, "--exec-gate-url="+url)
	assert.Len(t, args, len(base)+1, "one flag added, nothing else")
	cert := certSpec(objs, "remedy-worker-gate")
	assert.Equal(t, []any{"10.0.0.7"}, cert["ipAddresses"], "the Pods verify the gate at that IP")
	assert.Equal(t, append(append([]any(nil), baseCert["dnsNames"].([]any)...), "gate.example"), cert["dnsNames"], "the Service's names stay")

	objs, _ = render(t, map[string]any{"codec": map[string]any{"dnsNames": []any{"remedy-codec.example.com"}}})
	assert.Contains(t, certSpec(objs, codecName)["dnsNames"], "remedy-codec.example.com")
	assert.Contains(t, certSpec(objs, codecName)["dnsNames"], "remedy-codec.remedy-system.svc")
}

package main

import (
	"bytes"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/remedy-dev/remedy/internal/install"
	"github.com/remedy-dev/remedy/internal/release"
)

// valuesYAML writes the values with deploy/'s settings as their defaults.
func valuesYAML(deployments []install.Object, codecPeers any) ([]byte, error) {
	sizes, address, err := componentValues(deployments)
	if err != nil {
		return nil, err
	}
	peers, err := yaml.Marshal(map[string]any{"from": codecPeers})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(generated)
	fmt.Fprintf(&b, valuesImage, release.Repository)
	fmt.Fprintf(&b, valuesTemporal, address, temporalTLSSecret)
	fmt.Fprintf(&b, valuesCodec, indent(string(peers), "    "))
	for _, c := range components {
		s, ok := sizes[c.Key]
		if !ok {
			return nil, fmt.Errorf("deploy/manager has no Deployment %s", c.Deployment)
		}
		b.WriteString(s + "\n")
	}
	return b.Bytes(), nil
}

// componentValues are each Deployment's values (replicas and resources) by
// its values key, and the one Temporal address deploy/manager names.
func componentValues(deployments []install.Object) (sizes map[string]string, address string, err error) {
	sizes = map[string]string{}
	for _, d := range deployments {
		key := componentKey(d)
		spec := d["spec"].(map[string]any)
		c := spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		for _, a := range c["args"].([]any) {
			if v, ok := strings.CutPrefix(a.(string), temporalAddressFlag); ok {
				if address != "" && address != v {
					return nil, "", fmt.Errorf("deploy/manager names two Temporal addresses: %s and %s", address, v)
				}
				address = v
			}
		}
		res, err := yaml.Marshal(map[string]any{"resources": c["resources"]})
		if err != nil {
			return nil, "", err
		}
		sizes[key] = fmt.Sprintf("%s:\n  replicas: %v\n%s", key, spec["replicas"], indent(string(res), "  "))
	}
	if address == "" {
		return nil, "", fmt.Errorf("deploy/manager names no --temporal-address")
	}
	return sizes, address, nil
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// valuesImage is the values' head; its argument the image repository.
const valuesImage = `# Defaults are deploy/'s: the chart rendered with them is what README's kubectl
# install applies.

image:
  repository: %s
  # tag defaults to the chart's appVersion.
  tag: ""
  # digest (sha256:...) pins the image, as make release's install manifest does.
  digest: ""

`

// valuesTemporal are the Temporal, webhook client CA and payload keys
// values; its arguments deploy/'s Temporal address and TLS Secret.
const valuesTemporal = `temporal:
  # address of Temporal's frontend (--temporal-address of the three processes).
  address: %s
  # namespace: the Temporal namespace (TEMPORAL_NAMESPACE); empty keeps "default".
  namespace: ""
  tls:
    # enabled: TLS to Temporal, verified with ca.crt of secretName.
    enabled: false
    # secretName holds ca.crt, and tls.crt and tls.key for mTLS (a cert-manager
    # Certificate's Secret), mounted at /etc/remedy/temporal-tls.
    secretName: %s
    # clientCertificate: present tls.crt and tls.key (mTLS).
    clientCertificate: true
    # serverName, when the server's certificate does not name the address's host.
    serverName: ""

# webhookClientCA: PEM of the CA that signs the API server's webhook client
# certificate; both webhook servers admit only that client. Empty: create
# Secret remedy-system/remedy-webhook-client-ca (key ca.crt) yourself.
webhookClientCA: ""

# payloadKeys: Remedy's payload keys, with which its parts seal everything
# they send through Temporal (docs/security.md, "The Temporal trust
# boundary"): keys maps each key ID to 32 random bytes, base64
# (head -c 32 /dev/urandom | base64), and active names the one to seal with.
# Empty: create Secret remedy-system/remedy-payload-keys yourself
# (docs/operate.md); no part starts without it.
payloadKeys:
  active: ""
  keys: {}

`

// valuesCodec are the codec server, NetworkPolicy and exec gate values; its
// argument the codec NetworkPolicy's peers, indented.
const valuesCodec = `codec:
  # enabled: the operator serves Remedy's codec server (docs/operate.md, "The
  # codec server"): the Temporal Web UI and temporal --codec-endpoint read
  # Remedy's sealed payloads and send people's approval decisions through it.
  # TLS on 8091, Service remedy-codec, cert-manager Certificate remedy-codec.
  enabled: true
  # allowedOrigins: the Web UI's origins (https://temporal-ui.example.com)
  # whose browsers may call it with the /login cookie (--codec-allowed-origins).
  allowedOrigins: []
  # dnsNames and ipAddresses: more names for Certificate remedy-codec, e.g.
  # the host an Ingress that passes TLS through serves it at.
  dnsNames: []
  ipAddresses: []
  networkPolicy:
    # from: the peers NetworkPolicy remedy-codec admits to the codec port
    # (with networkPolicies.enabled): by default namespaces labelled
    # remedy.dev/codec-clients=true, e.g. your ingress controller's.
%s
# networkPolicies.enabled: install deploy/network's NetworkPolicies
# (kubectl apply -k deploy/network); they need a CNI that enforces them.
networkPolicies:
  enabled: false

execGate:
  # url: where the job executor's Pods reach the worker's exec gate (the
  # worker's --exec-gate-url). Empty: the worker's default, the headless
  # Service remedy-worker-gate by its cluster DNS name.
  url: ""
  # dnsNames and ipAddresses: more names for Certificate remedy-worker-gate,
  # with which the Pods verify the gate: the host of url.
  dnsNames: []
  ipAddresses: []

`

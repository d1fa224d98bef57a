package devenv

import (
	"fmt"
	"os"
	"path/filepath"
)

// containerdConfig is config version 4 (containerd 2.4): the socket
// addresses belong to the server plugins, a top-level [grpc] is ignored.
const containerdConfig = `version = 4
root = %[1]q
state = %[2]q

[debug]
  format = "json"

[plugins]
  [plugins.'io.containerd.server.v1.grpc']
    address = %[3]q
  [plugins.'io.containerd.server.v1.ttrpc']
    address = %[4]q
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %[5]q
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = %[6]q
  [plugins.'io.containerd.cri.v1.runtime']
    # Without CAP_SYS_RESOURCE runc cannot give the sandbox oom_score_adj -998,
    # and every sandbox fails with "can't get final child's PID from pipe".
    restrict_oom_score_adj = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          SystemdCgroup = false
          BinaryName = %[7]q
          Root = %[8]q
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%[9]q]
      conf_dir = %[10]q
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
`

// refusedRegistry sends every registry (_default) to a local port nothing
// listens on: containerd runs on the host, where the egress rules do not
// apply, so this is what keeps a pull from ever leaving the machine. An image
// that was not imported fails at once with ErrImagePull.
const refusedRegistry = `server = "https://127.0.0.1:1"

[host."https://127.0.0.1:1"]
  capabilities = ["pull", "resolve"]
`

const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q, "gateway": %q}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": %q
    }
  }]
}
`

// kubeletConfig: cgroup v1 and cgroupfs, as this kind of machine has; no
// read-only or healthz port; only client certificates are admitted (the API
// server's kubelet client's, and the API server's users', such as dev's
// Prometheus), and what each may do is asked of the API server (Webhook:
// RBAC on nodes/metrics, nodes/proxy...), so a scraper cannot exec; no DNS (resolvConf empty: a Pod's lookups could
// only go to the host's resolvers, off the machine); image GC and eviction
// thresholds low enough for a shared disk; a Pod resynced every 20s, not 1m:
// a crash-looping container is reported Waiting (CrashLoopBackOff, which
// KubePodCrashLooping reads) only from the first resync within its back-off,
// since the kubelet requeues it for the back-off's end, capped at this.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%[1]s
address: %[2]s
port: %[3]d
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[4]q}
authorization:
  mode: Webhook
  webhook: {cacheAuthorizedTTL: 30s, cacheUnauthorizedTTL: 5s}
podLogsDir: %[5]q
resolvConf: ""
failSwapOn: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
volumeStatsAggPeriod: 0s
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
nodeStatusReportFrequency: 10s
syncFrequency: 20s
`

// nodePaths are the files of a node under its directory.
type nodePaths struct{ dir string }

func (p nodePaths) at(parts ...string) string {
	return filepath.Join(append([]string{p.dir}, parts...)...)
}

// socket is containerd's, outside the node directory: a unix socket's path
// has at most 107 bytes, and a checkout's .dev/tmp can be deep.
func (p nodePaths) socket() string { return filepath.Join(nodeRunDir, "containerd.sock") }
func (p nodePaths) state() string  { return p.at("state.json") }

// writeConfigs writes containerd's, the CNI's and the kubelet's configuration.
func (p nodePaths) writeConfigs(sandboxImage, kubeletClientCA string) error {
	for _, d := range []string{nodeRunDir, p.at("containerd"), p.at("certs.d", "_default"), p.at("net.d"), p.at("kubelet"), p.at("pod-logs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	return writeFiles(map[string][]byte{
		p.at("containerd", "config.toml"): fmt.Appendf(nil, containerdConfig,
			p.at("containerd", "root"), p.at("containerd", "state"), p.socket(), p.socket()+".ttrpc",
			sandboxImage, p.at("certs.d"), runcPath, p.at("containerd", "runc"), cniBinDir, p.at("net.d")),
		p.at("certs.d", "_default", "hosts.toml"): []byte(refusedRegistry),
		p.at("net.d", "10-remedy.conflist"):       fmt.Appendf(nil, cniConfig, cniNetwork, podBridge, PodCIDR, podGateway, p.at("ipam")),
		p.at("kubelet", "config.yaml"): fmt.Appendf(nil, kubeletConfig,
			p.socket(), NodeIP, kubeletPort, kubeletClientCA, p.at("pod-logs")),
	})
}

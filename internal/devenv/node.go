package devenv

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// NodeOptions make Start run a real node after the API server: containerd,
// the node's network, kube-scheduler and the kubelet, so Pods run.
type NodeOptions struct {
	// Containerd is the directory with containerd, containerd-shim-runc-v2
	// and ctr (CachedContainerd, built by `hack/tools/install.sh node`).
	Containerd string
	// Images are docker-archive tarballs imported into the node's containerd
	// before the kubelet starts: no registry is ever contacted, so every
	// image a Pod names must be among them.
	Images []string
	// SandboxImage is the pause image's reference, one of Images.
	SandboxImage string
}

// The node's fixed names and addresses. One node runs per machine at a time
// (nodeLock): the kubelet's cgroups, iptables chains and sysctls are
// machine-wide, so two nodes would undo each other's.
const (
	NodeName = "remedy-node"
	// NodeIP sits on an otherwise empty link: the kubelet refuses loopback
	// node IPs and this kernel may lack the dummy driver.
	NodeIP = "10.201.0.1"
	// nodeLink holds NodeIP; podBridge is the CNI bridge of the Pod network.
	nodeLink  = "remedy-node0"
	podBridge = "remedy-pods0"
	// PodCIDR is the Pod network; ServiceCIDR the Service range, routed to
	// the Pod bridge so that no Service IP follows the default route out.
	PodCIDR     = "10.244.0.0/24"
	podGateway  = "10.244.0.1"
	ServiceCIDR = "10.96.0.0/16"
	// kubernetesServiceIP is the default/kubernetes Service, DNATed to the
	// API server (there is no kube-proxy): in-cluster clients use it.
	kubernetesServiceIP = "10.96.0.1"
	kubeletPort         = 10250
	// filterChain drops Pod and Service traffic the host would forward;
	// natChain sends the kubernetes Service to the API server.
	filterChain  = "REMEDY-NODE-EGRESS"
	natChain     = "REMEDY-NODE-SERVICES"
	nodeLockFile = "/run/remedy-node.lock"
	// nodeRunDir holds containerd's sockets; teardown removes it.
	nodeRunDir = "/run/remedy-node"
	cniNetwork = "remedy-node"
)

// NodeOptionsFromEnv finds containerd in the tools cache at the pinned
// version and checks that the Debian parts the node needs are installed.
func NodeOptionsFromEnv(repoRoot string) (NodeOptions, error) {
	cache, err := ToolsCache()
	if err != nil {
		return NodeOptions{}, err
	}
	dir, err := CachedContainerd(repoRoot, cache)
	if err != nil {
		return NodeOptions{}, err
	}
	o := NodeOptions{Containerd: dir}
	for _, p := range []string{filepath.Join(dir, "containerd"), filepath.Join(dir, "containerd-shim-runc-v2"), filepath.Join(dir, "ctr"), runcPath, filepath.Join(cniBinDir, "bridge"), filepath.Join(cniBinDir, "host-local")} {
		if _, err := os.Stat(p); err != nil {
			return o, fmt.Errorf("missing %s: build the node's parts with `make tools` (or hack/tools/install.sh node): %w", p, err)
		}
	}
	for _, cmd := range []string{"iptables", "ip"} {
		if _, err := lookPath(cmd); err != nil {
			return o, fmt.Errorf("the node needs %s: `make tools` installs it: %w", cmd, err)
		}
	}
	return o, nil
}

// Paths the Debian packages install.
const (
	runcPath  = "/usr/sbin/runc"
	cniBinDir = "/usr/lib/cni"
)

// freePortOn returns a port nothing listens on at ip.
func freePortOn(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port on %s: %w", ip, err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return strconv.Atoi(port)
}

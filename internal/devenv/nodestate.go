package devenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// nodeState is what a node found on the machine before it changed anything:
// teardown undoes exactly the difference, in the process that ran the node
// or, after that process's SIGKILL, in its janitor (janitor.go).
type nodeState struct {
	// Dir holds everything of the node: configs, containerd's and the
	// kubelet's state, Pod volumes and logs.
	Dir              string `json:"dir"`
	ContainerdSocket string `json:"containerdSocket"`
	// Sysctls are the values the kubelet and the CNI bridge plugin change.
	Sysctls map[string]string `json:"sysctls"`
	// Netns, ShimSockets and Chains were there before: only newer ones are removed.
	Netns       []string            `json:"netns"`
	ShimSockets []string            `json:"shimSockets"`
	Chains      map[string][]string `json:"chains"`
	CNIResults  []string            `json:"cniResults"`
	// MissingDirs did not exist before: containerd, runc and CNI create them.
	MissingDirs []string `json:"missingDirs"`
}

// createdDirs are machine-wide directories a node may create.
var createdDirs = []string{"/run/containerd", netnsDir, "/var/lib/cni"}

// changedSysctls are the machine-wide settings the kubelet writes
// (protectKernelDefaults off) and the bridge plugin's IP forwarding.
var changedSysctls = []string{
	"net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding",
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// Directories whose entries outlive a node unless removed: the network
// namespaces containerd mounts, the shims' sockets and the CNI result cache.
const (
	netnsDir      = "/run/netns"
	shimSocketDir = "/run/containerd/s"
	cniResultDir  = "/var/lib/cni/results"
)

// iptablesTables are the tables the kubelet and the node add chains to, per command.
var iptablesTables = map[string][]string{
	"iptables":  {"filter", "nat", "mangle"},
	"ip6tables": {"filter", "nat", "mangle"},
}

func observeNode(dir, socket string) (nodeState, error) {
	st := nodeState{Dir: dir, ContainerdSocket: socket, Sysctls: map[string]string{}, Chains: map[string][]string{}}
	for _, s := range changedSysctls {
		if b, err := os.ReadFile(filepath.Join("/proc/sys", s)); err == nil {
			st.Sysctls[s] = strings.TrimSpace(string(b))
		}
	}
	for _, d := range createdDirs {
		if _, err := os.Stat(d); errors.Is(err, fs.ErrNotExist) {
			st.MissingDirs = append(st.MissingDirs, d)
		}
	}
	st.Netns = entries(netnsDir)
	st.ShimSockets = entries(shimSocketDir)
	st.CNIResults = entries(cniResultDir)
	for cmd, tables := range iptablesTables {
		if _, err := lookPath(cmd); err != nil {
			continue
		}
		for _, t := range tables {
			chains, err := iptablesChains(cmd, t)
			if err != nil {
				return st, err
			}
			st.Chains[cmd+"/"+t] = chains
		}
	}
	return st, nil
}

func (st nodeState) save(path string) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode node state: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write node state: %w", err)
	}
	return nil
}

func loadNodeState(path string) (nodeState, error) {
	var st nodeState
	b, err := os.ReadFile(path)
	if err != nil {
		return st, fmt.Errorf("read node state: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("decode node state %s: %w", path, err)
	}
	return st, nil
}

// entries lists dir's names, sorted; a missing dir has none.
func entries(dir string) []string {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var names []string
	for _, d := range des {
		names = append(names, d.Name())
	}
	sort.Strings(names)
	return names
}

// added is what now holds that before did not.
func added(before, now []string) []string {
	seen := map[string]bool{}
	for _, b := range before {
		seen[b] = true
	}
	var out []string
	for _, n := range now {
		if !seen[n] {
			out = append(out, n)
		}
	}
	return out
}

package node

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, 100 on every Linux Remedy runs on.
const clockTick = 10 * time.Millisecond

// A group of processes whose cost the benchmarks report.
type group string

const (
	// controlPlane is what runs without a node: etcd, kube-apiserver and
	// kube-controller-manager.
	controlPlane group = "control-plane"
	// nodeDaemons are containerd, kube-scheduler and the kubelet.
	nodeDaemons group = "node"
	// shims are containerd's shims, one per Pod.
	shims group = "shims"
	// pods are the containers' processes (pause and the demo app).
	pods group = "pods"
)

// byComm sorts this process's descendants into groups by command name
// (comm, at most 15 bytes).
var byComm = map[string]group{
	"etcd": controlPlane, "kube-apiserver": controlPlane, "kube-controller": controlPlane,
	"containerd": nodeDaemons, "kube-scheduler": nodeDaemons, "kubelet": nodeDaemons,
}

// usage is one process's CPU time so far and its resident memory.
type usage struct {
	cpu time.Duration
	rss int64 // bytes
}

// sample reads every process of every group: the pods' by their cgroup
// (the kubelet's kubepods), the shims by name and containerd socket (they
// leave containerd's tree when they start), the rest as descendants of this
// process by name.
func sample() map[group]map[int]usage {
	out := map[group]map[int]usage{controlPlane: {}, nodeDaemons: {}, shims: {}, pods: {}}
	inPods := map[int]bool{}
	for _, pid := range podPIDs() {
		inPods[pid] = true
	}
	type proc struct {
		comm string
		ppid int
		u    usage
	}
	procs := map[int]proc{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, ppid, u, ok := readProc(pid); ok {
			procs[pid] = proc{comm, ppid, u}
		}
	}
	self := os.Getpid()
	descends := func(pid int) bool {
		for range 64 {
			p, ok := procs[pid]
			if !ok || p.ppid <= 1 {
				return false
			}
			if p.ppid == self {
				return true
			}
			pid = p.ppid
		}
		return false
	}
	for pid, p := range procs {
		switch {
		case inPods[pid]:
			out[pods][pid] = p.u
		case strings.HasPrefix(p.comm, "containerd-shim") && cmdlineHas(pid, "/run/remedy-node/"):
			out[shims][pid] = p.u
		case byComm[p.comm] != "" && descends(pid):
			out[byComm[p.comm]][pid] = p.u
		}
	}
	return out
}

// readProc reads a process's name, parent, CPU time (/proc/<pid>/stat) and
// resident memory (statm's second field, in pages).
func readProc(pid int) (comm string, ppid int, u usage, ok bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	raw, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return "", 0, u, false
	}
	// comm is in parentheses and may hold spaces; the fields after it are plain.
	s := string(raw)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return "", 0, u, false
	}
	f := strings.Fields(s[closing+2:])
	if len(f) < 13 {
		return "", 0, u, false
	}
	ppid, _ = strconv.Atoi(f[1])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	u.cpu = time.Duration(utime+stime) * clockTick
	if statm, err := os.ReadFile(filepath.Join(dir, "statm")); err == nil {
		if mf := strings.Fields(string(statm)); len(mf) > 1 {
			pages, _ := strconv.ParseInt(mf[1], 10, 64)
			u.rss = pages * int64(os.Getpagesize())
		}
	}
	return s[open+1 : closing], ppid, u, true
}

func cmdlineHas(pid int, s string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return err == nil && strings.Contains(string(b), s)
}

// podPIDs are the processes in the kubelet's pod cgroups, in any hierarchy.
func podPIDs() []int {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	roots = append(roots, "/sys/fs/cgroup/kubepods")
	seen := map[int]bool{}
	var pids []int
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
					seen[pid] = true
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// cost is a group's CPU (in cores) over a window and its resident memory at
// the window's end.
type cost struct {
	cores float64
	rssMB float64
	procs int
}

// measure waits window and returns each group's cost over it. A process
// that started within the window counts from its start; one that ended in
// it is left out.
func measure(window time.Duration) map[group]cost {
	before := sample()
	time.Sleep(window) // the measurement window itself; asserts nothing
	after := sample()
	out := map[group]cost{}
	for g, ps := range after {
		var c cost
		for pid, u := range ps {
			c.cores += (u.cpu - before[g][pid].cpu).Seconds() / window.Seconds()
			c.rssMB += float64(u.rss) / (1 << 20)
			c.procs++
		}
		out[g] = c
	}
	return out
}

package harness

// What the benchmarks of test/node and test/monitoring measure: the CPU and
// resident memory of the parts, by group, over a window.

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
)

// clockTick is USER_HZ, 100 on every Linux Remedy runs on.
const clockTick = 10 * time.Millisecond

// CostGroup is a group of processes whose cost the benchmarks report.
type CostGroup string

const (
	// ControlPlane is what runs without a node: etcd, kube-apiserver and
	// kube-controller-manager.
	ControlPlane CostGroup = "control-plane"
	// NodeDaemons are containerd, kube-scheduler and the kubelet.
	NodeDaemons CostGroup = "node"
	// Shims are containerd's shims, one per Pod.
	Shims CostGroup = "shims"
	// PodProcesses are the containers' processes (pause and the demo app).
	PodProcesses CostGroup = "pods"
	// Prometheus and KubeStateMetrics are the monitoring parts (Options.Monitoring).
	Prometheus       CostGroup = "prometheus"
	KubeStateMetrics CostGroup = "kube-state-metrics"
)

// byComm sorts this process's descendants into groups by command name
// (comm, at most 15 bytes).
var byComm = map[string]CostGroup{
	"etcd": ControlPlane, "kube-apiserver": ControlPlane, "kube-controller": ControlPlane,
	"containerd": NodeDaemons, "kube-scheduler": NodeDaemons, "kubelet": NodeDaemons,
	"prometheus": Prometheus, "kube-state-metr": KubeStateMetrics,
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
func sample() map[CostGroup]map[int]usage {
	out := map[CostGroup]map[int]usage{ControlPlane: {}, NodeDaemons: {}, Shims: {}, PodProcesses: {}, Prometheus: {}, KubeStateMetrics: {}}
	inPods := map[int]bool{}
	for _, pid := range PodPIDs() {
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
			out[PodProcesses][pid] = p.u
		case strings.HasPrefix(p.comm, "containerd-shim") && cmdlineHas(pid, "/run/remedy-node/"):
			out[Shims][pid] = p.u
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

// PodPIDs are the processes in the kubelet's pod cgroups, in any hierarchy.
func PodPIDs() []int {
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

// Cost is a group's CPU (in cores) over a window and its resident memory at
// the window's end.
type Cost struct {
	Cores float64
	RSSMB float64
	Procs int
}

// MeasureCost waits window and returns each group's cost over it. A process
// that started within the window counts from its start; one that ended in
// it is left out.
func MeasureCost(window time.Duration) map[CostGroup]Cost {
	before := sample()
	time.Sleep(window) // the measurement window itself; asserts nothing
	after := sample()
	out := map[CostGroup]Cost{}
	for g, ps := range after {
		var c Cost
		for pid, u := range ps {
			c.Cores += (u.cpu - before[g][pid].cpu).Seconds() / window.Seconds()
			c.RSSMB += float64(u.rss) / (1 << 20)
			c.Procs++
		}
		out[g] = c
	}
	return out
}

// AddCost adds c to sum, group by group.
func AddCost(sum, c map[CostGroup]Cost) map[CostGroup]Cost {
	if sum == nil {
		sum = map[CostGroup]Cost{}
	}
	for g, v := range c {
		s := sum[g]
		s.Cores, s.RSSMB, s.Procs = s.Cores+v.Cores, s.RSSMB+v.RSSMB, s.Procs+v.Procs
		sum[g] = s
	}
	return sum
}

// ReportCost reports g's CPU and memory, the control plane's, and their
// ratios, each per iteration.
func ReportCost(b *testing.B, sum map[CostGroup]Cost, g CostGroup) {
	n := float64(b.N)
	part, cp := sum[g], sum[ControlPlane]
	require.NotZero(b, part.Procs, "no process of %s found", g)
	require.NotZero(b, cp.Procs, "no control plane process found")
	b.ReportMetric(part.Cores/n, "cores")
	b.ReportMetric(part.RSSMB/n, "rss-MB")
	b.ReportMetric(cp.Cores/n, "control-plane-cores")
	b.ReportMetric(cp.RSSMB/n, "control-plane-rss-MB")
	b.ReportMetric(part.Cores/cp.Cores, "x-control-plane-cpu")
	b.ReportMetric(part.RSSMB/cp.RSSMB, "x-control-plane-rss")
}

// MeasureIdleCost is b.N windows of MeasureCost, each after 5s for the
// parts' own work (a start, an earlier benchmark) to settle, summed.
func MeasureIdleCost(b *testing.B, window time.Duration) map[CostGroup]Cost {
	var sum map[CostGroup]Cost
	for range b.N {
		b.StopTimer()
		time.Sleep(5 * time.Second) // paces a measurement; asserts nothing
		b.StartTimer()
		sum = AddCost(sum, MeasureCost(window))
	}
	return sum
}

// MeasurePodsCost is b.N windows of MeasureCost, each with pods demo app
// replicas Ready on the node (started before the window, settled for 10s,
// and stopped after it, waiting for their Pods to go), summed.
func MeasurePodsCost(b *testing.B, pods int32, window time.Duration) map[CostGroup]Cost {
	ctx := context.Background()
	var sum map[CostGroup]Cost
	for range b.N {
		b.StopTimer()
		ns := Namespace(b)
		d := Deployment(b, ns, "many", pods)
		start := time.Now()
		Eventually(b, d, 10*time.Minute, func(d *appsv1.Deployment) bool { return d.Status.ReadyReplicas == pods })
		b.Logf("%d Pods Ready in %.1fs", pods, time.Since(start).Seconds())
		time.Sleep(10 * time.Second) // the Pods' start settles: paces a measurement; asserts nothing
		b.StartTimer()
		sum = AddCost(sum, MeasureCost(window))
		b.StopTimer()
		require.NoError(b, kube.Delete(ctx, d, ctrlclient.PropagationPolicy(metav1.DeletePropagationForeground)))
		start = time.Now()
		require.Eventually(b, func() bool {
			var l corev1.PodList
			require.NoError(b, kube.List(ctx, &l, ctrlclient.InNamespace(ns)))
			return len(l.Items) == 0
		}, 10*time.Minute, time.Second, "the Pods of %s did not stop", d.Name)
		b.Logf("Pods stopped in %.1fs; %d processes left in the pod cgroups", time.Since(start).Seconds(), len(PodPIDs()))
	}
	return sum
}

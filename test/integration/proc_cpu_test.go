package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, 100 on every Linux Remedy runs on.
const clockTick = 10 * time.Millisecond

// procStat is one process's command name, parent and CPU time from /proc/<pid>/stat.
type procStat struct {
	comm string
	ppid int
	cpu  time.Duration
}

func readStat(pid int) (procStat, bool) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, false
	}
	// comm is in parentheses and may hold spaces; the fields after it are plain.
	s := string(raw)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return procStat{}, false
	}
	f := strings.Fields(s[closing+2:])
	if len(f) < 13 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return procStat{comm: s[open+1 : closing], ppid: ppid, cpu: time.Duration(utime+stime) * clockTick}, true
}

// partsCPU is the CPU time used so far by this test process, which runs the
// operator and the worker in-process ("remedy"), and by each part the harness
// started under it, by command name (temporal, kube-apiserver, etcd, ...).
func partsCPU() map[string]time.Duration {
	self := os.Getpid()
	out := map[string]time.Duration{}
	if s, ok := readStat(self); ok {
		out["remedy"] = s.cpu
	}
	entries, _ := os.ReadDir("/proc")
	stats := map[int]procStat{}
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if s, ok := readStat(pid); ok {
				stats[pid] = s
			}
		}
	}
	for pid, s := range stats {
		if pid != self && descends(stats, pid, self) {
			out[s.comm] += s.cpu
		}
	}
	return out
}

func descends(stats map[int]procStat, pid, ancestor int) bool {
	for seen := 0; pid > 1 && seen < 64; seen++ {
		s, ok := stats[pid]
		if !ok {
			return false
		}
		if s.ppid == ancestor {
			return true
		}
		pid = s.ppid
	}
	return false
}

// cpuSince is each part's CPU time since before.
func cpuSince(before map[string]time.Duration) map[string]time.Duration {
	out := partsCPU()
	for k, v := range before {
		out[k] -= v
	}
	return out
}

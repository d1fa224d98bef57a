package dev

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// proc is one process, told apart from a later one with the same pid by
// its start time.
type proc struct {
	pid        int
	ppid       int
	comm       string
	state      string
	startTicks string
}

// readProc parses /proc/<pid>/stat; ok is false once the process is gone.
func readProc(pid int) (p proc, ok bool) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return proc{}, false
	}
	// comm is in parentheses and may hold spaces; the fields after it are fixed.
	s := string(raw)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return proc{}, false
	}
	f := strings.Fields(s[close+1:])
	if len(f) < 20 {
		return proc{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return proc{pid: pid, ppid: ppid, comm: s[open+1 : close], state: f[0], startTicks: f[19]}, true
}

// descendants lists every living process below pid.
func descendants(pid int) []proc {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]proc{}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(n); ok {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []proc
	queue := []int{pid}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		for _, c := range children[next] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// alive says whether p still runs (a zombie has ended).
func (p proc) alive() bool {
	now, ok := readProc(p.pid)
	return ok && now.startTicks == p.startTicks && now.state != "Z"
}

// kill ends p and its process group, to clean up after a failed test.
func (p proc) kill() {
	if p.alive() {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

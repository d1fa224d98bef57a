//go:build linux

package devenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// MachineSnapshot renders what a node may change on this machine: links,
// routes, iptables chains and rules, mounts, the sysctls it touches, its
// directories and the processes of a node. Two snapshots around a node's
// life must be equal (the teardown tests).
func MachineSnapshot() (string, error) {
	var b strings.Builder
	for _, args := range [][]string{{"ip", "-o", "link", "show"}, {"ip", "route", "show", "table", "all"}} {
		out, err := run(args[0], args[1:]...)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "## %s\n", strings.Join(args, " "))
		for _, l := range strings.Split(out, "\n") {
			// Interface indexes and link counters change; names and flags count.
			if f := strings.Fields(l); len(f) > 2 && args[1] == "-o" {
				l = f[1] + " " + f[2]
			}
			b.WriteString(l + "\n")
		}
	}
	for cmd, tables := range iptablesTables {
		for _, t := range tables {
			out, err := run(cmd, "-w", "-t", t, "-S")
			if err != nil {
				continue
			}
			fmt.Fprintf(&b, "## %s -t %s\n%s", cmd, t, out)
		}
	}
	mounts, err := MountsUnder("/")
	if err != nil {
		return "", err
	}
	sort.Strings(mounts)
	fmt.Fprintf(&b, "## mounts\n%s\n", strings.Join(mounts, "\n"))
	b.WriteString("## sysctls\n")
	for _, s := range changedSysctls {
		v, _ := os.ReadFile(filepath.Join("/proc/sys", s))
		fmt.Fprintf(&b, "%s=%s", s, v)
	}
	b.WriteString("## directories\n")
	for _, d := range append(createdDirs, cniResultDir, shimSocketDir) {
		fmt.Fprintf(&b, "%s: %v\n", d, entries(d))
	}
	cgroups := podCgroupRoots()
	fmt.Fprintf(&b, "## pod cgroups\n%v\n## node processes\n", cgroups)
	for _, e := range entries("/proc") {
		comm, err := os.ReadFile(filepath.Join("/proc", e, "comm"))
		if err != nil {
			continue
		}
		switch c := strings.TrimSpace(string(comm)); c {
		case "containerd", "containerd-shim", "containerd-shim-runc-v2", "kubelet", "kube-scheduler", "pause", "runc":
			fmt.Fprintf(&b, "%s %s\n", e, c)
		}
	}
	return b.String(), nil
}

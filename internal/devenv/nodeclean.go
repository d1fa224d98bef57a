//go:build linux

package devenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// teardown undoes a node from the state it recorded before it started:
// Pods' and shims' processes, mounts, network namespaces, cgroups, iptables
// chains, links and sysctls, then its directory. It can run twice.
func teardown(st nodeState) error {
	var errs []error
	killNodeProcesses(st.Dir, nodeRunDir+"/")
	errs = append(errs, unmountUnder(st.Dir+"/"), unmountUnder(nodeRunDir+"/"), removeNetns(st))
	errs = append(errs, removePodCgroups())
	for key, before := range st.Chains {
		cmd, table, _ := strings.Cut(key, "/")
		now, err := iptablesChains(cmd, table)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, removeChains(cmd, table, added(before, now)))
	}
	for _, l := range []string{podBridge, nodeLink} {
		if _, err := os.Stat(filepath.Join("/sys/class/net", l)); err == nil {
			if _, err := run("ip", "link", "del", l); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for s, v := range st.Sysctls {
		if err := os.WriteFile(filepath.Join("/proc/sys", s), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", s, v, err))
		}
	}
	for _, s := range added(st.ShimSockets, entries(shimSocketDir)) {
		_ = os.Remove(filepath.Join(shimSocketDir, s))
	}
	// Results of the node's network and of containerd's loopback network.
	for _, r := range added(st.CNIResults, entries(cniResultDir)) {
		_ = os.Remove(filepath.Join(cniResultDir, r))
	}
	for _, d := range append(st.MissingDirs, st.Dir, nodeRunDir) {
		// A mount left in place would have its files removed through it.
		if left, err := MountsUnder(d + "/"); err != nil || len(left) > 0 {
			errs = append(errs, fmt.Errorf("keep %s: mounts remain below it: %v", d, left), err)
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// killNodeProcesses kills every process of the node: those that name its
// directory or its sockets' (containerd, its shims, the kubelet) and every container's (in
// the kubepods cgroups), until none is left.
func killNodeProcesses(dir, runDir string) {
	for range 50 {
		pids := append(append(podPIDs(), pidsNaming(dir)...), pidsNaming(runDir)...)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pidsNaming lists processes whose command line contains s.
func pidsNaming(s string) []int {
	var pids []int
	self := os.Getpid()
	for _, e := range entries("/proc") {
		pid, err := strconv.Atoi(e)
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e, "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// podCgroupRoots are the kubelet's cgroups in every hierarchy (cgroup v1 or v2).
func podCgroupRoots() []string {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if _, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil {
		roots = append(roots, "/sys/fs/cgroup/kubepods")
	}
	return roots
}

func podPIDs() []int {
	var pids []int
	for _, root := range podCgroupRoots() {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// removePodCgroups removes the kubelet's cgroup trees, deepest first.
func removePodCgroups() error {
	var errs []error
	for _, root := range podCgroupRoots() {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// removeNetns unmounts and removes the network namespaces the node added.
func removeNetns(st nodeState) error {
	var errs []error
	for _, ns := range added(st.Netns, entries(netnsDir)) {
		p := filepath.Join(netnsDir, ns)
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove netns %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unmountUnder detaches every mount below prefix, deepest first.
func unmountUnder(prefix string) error {
	var errs []error
	for range 5 {
		mounts, err := MountsUnder(prefix)
		if err != nil {
			return err
		}
		if len(mounts) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, m := range mounts {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
			}
		}
	}
	return errors.Join(errs...)
}

// MountsUnder lists this mount namespace's mount points below prefix,
// deepest first.
func MountsUnder(prefix string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		m := unescapeMount(fields[4])
		if strings.HasPrefix(m, prefix) {
			mounts = append(mounts, m)
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	return mounts, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 is a space).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

package procs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// children are the pids of this process's children named comm.
func children(comm string) []int {
	self := os.Getpid()
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		open, closing := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || closing < open {
			continue
		}
		fields := strings.Fields(string(stat[closing+1:]))
		if len(fields) < 2 || string(stat[open+1:closing]) != comm {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == self {
			pids = append(pids, pid)
		}
	}
	return pids
}

// sigkill kills the one child named comm and waits until it is gone.
func sigkill(t testing.TB, comm string) (cmdline []string) {
	t.Helper()
	pids := children(comm)
	require.Len(t, pids, 1, "one %s child of the test", comm)
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pids[0]))
	require.NoError(t, err)
	cmdline = strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	require.NoError(t, syscall.Kill(pids[0], syscall.SIGKILL))
	require.Eventually(t, func() bool { return len(children(comm)) == 0 || !alive(pids[0]) }, 10*time.Second, 20*time.Millisecond, "%s survived SIGKILL", comm)
	return cmdline
}

// alive says whether pid runs (a zombie does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && len(stat) > i+2 && stat[i+2] != 'Z'
}

// KillAPIServer SIGKILLs kube-apiserver; etcd keeps running.
func KillAPIServer(t testing.TB) {
	t.Helper()
	sigkill(t, "kube-apiserver")
}

// RestartAPIServer starts kube-apiserver again on the same port with the
// same certificates and flags (Options.Restartable) and waits until it is healthy.
func RestartAPIServer(t testing.TB) {
	t.Helper()
	api := env.Kube.ControlPlane.APIServer
	_ = api.Stop() // reaps the killed process
	require.NoError(t, api.Start())
}

var (
	restartedMu sync.Mutex
	restarted   *exec.Cmd
	temporalCmd []string
)

// KillTemporal SIGKILLs the Temporal dev server.
func KillTemporal(t testing.TB) {
	t.Helper()
	restartedMu.Lock()
	defer restartedMu.Unlock()
	if restarted != nil {
		require.NoError(t, restarted.Process.Kill())
		_ = restarted.Wait()
		restarted = nil
		return
	}
	temporalCmd = sigkill(t, "temporal")
}

// RestartTemporal starts the Temporal dev server again with the same
// command line: same port, same database file (Options.Restartable).
func RestartTemporal(t testing.TB) {
	t.Helper()
	restartedMu.Lock()
	defer restartedMu.Unlock()
	require.NotEmpty(t, temporalCmd, "Temporal was not killed")
	require.Nil(t, restarted, "Temporal runs")
	cmd := exec.Command(temporalCmd[0], temporalCmd[1:]...)
	cmd.Stdout, cmd.Stderr = prefixed("temporal"), prefixed("temporal")
	require.NoError(t, cmd.Start())
	restarted = cmd
}

// stopRestarted stops a Temporal dev server RestartTemporal started.
func stopRestarted() {
	restartedMu.Lock()
	defer restartedMu.Unlock()
	if restarted == nil {
		return
	}
	_ = restarted.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = restarted.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = restarted.Process.Kill()
		<-done
	}
}

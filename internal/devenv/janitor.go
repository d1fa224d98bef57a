//go:build linux

package devenv

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
)

// janitorEnv names the node state file a janitor undoes.
const janitorEnv = "REMEDY_DEVENV_NODE_JANITOR"

// A janitor is a copy of this executable, in its own session, that undoes
// the node when the process that runs it dies without Stop, even by SIGKILL:
// the node's processes die with their parent, but its mounts, cgroups,
// network and sysctls outlive it. It holds the node lock too, so the next
// node waits for its cleanup. It exits when its stdin closes: at once if it
// read the dismissal byte, else after the teardown.
type janitor struct {
	w   *os.File
	cmd *exec.Cmd
}

func startJanitor(statePath string, lock *os.File) (*janitor, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("create janitor pipe: %w", err)
	}
	defer r.Close()
	cmd := exec.Command(self)
	cmd.Env = append(wrappedEnv(), janitorEnv+"="+statePath)
	cmd.Stdin = r
	cmd.ExtraFiles = []*os.File{lock}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("start node janitor: %w", err)
	}
	return &janitor{w: w, cmd: cmd}, nil
}

// dismiss tells the janitor the node is gone and waits for it to exit.
func (j *janitor) dismiss() {
	_, _ = j.w.Write([]byte{'x'})
	_ = j.w.Close()
	_ = j.cmd.Wait()
}

// runJanitorIfAsked is the janitor's main: it returns only in other processes.
func runJanitorIfAsked() {
	statePath := os.Getenv(janitorEnv)
	if statePath == "" {
		return
	}
	b, _ := io.ReadAll(os.Stdin)
	if len(b) > 0 {
		os.Exit(0)
	}
	st, err := loadNodeState(statePath)
	if err == nil {
		err = teardown(st)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "node janitor:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

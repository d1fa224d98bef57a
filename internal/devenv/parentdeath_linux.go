package devenv

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
)

// envtest and the Temporal SDK start etcd, kube-apiserver and temporal with
// their own SysProcAttr, so a parent-death signal cannot be set on them
// directly. Instead they are started through a link to the running
// executable, which sets the signal on itself and execs the real binary:
// the signal survives exec, so the real process dies with its parent.
const (
	// wrapTargetEnv holds the real binary a wrapped start runs.
	wrapTargetEnv = "REMEDY_DEVENV_EXEC_"
	// wrapParentEnv is the pid the wrapped process must outlive.
	wrapParentEnv = "REMEDY_DEVENV_PARENT"
)

// ExecIfWrapped must be the first call in main of every executable that
// starts an Env with DieWithParent. In a process started as a wrapper it
// never returns: it execs the real binary with SIGKILL as its parent-death
// signal. In a node's janitor it never returns either (janitor.go).
// Otherwise it returns at once.
func ExecIfWrapped() {
	runJanitorIfAsked()
	target := os.Getenv(wrapTargetEnv + wrapKey(os.Args[0]))
	if target == "" {
		return
	}
	// The signal belongs to the calling thread, and exec keeps only that thread.
	runtime.LockOSThread()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "set parent-death signal for %s: %v\n", target, errno)
		os.Exit(1)
	}
	// The parent may have died before the signal was set.
	if strconv.Itoa(os.Getppid()) != os.Getenv(wrapParentEnv) {
		os.Exit(1)
	}
	err := syscall.Exec(target, append([]string{target}, os.Args[1:]...), wrappedEnv())
	fmt.Fprintf(os.Stderr, "exec %s: %v\n", target, err)
	os.Exit(1)
}

// childSysProcAttr ties a child this process starts itself to its life.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

const canWrap = true

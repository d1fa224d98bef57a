// Command pause is the node's sandbox (pause) container: it holds a Pod's
// namespaces until SIGTERM and, as PID 1 of a shared PID namespace, reaps
// orphans. It imports nothing that writes at init, since a sandbox's root
// is read-only. internal/image builds it into the pause image, so the node
// needs no image from a registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}

package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"time"
)

// hostProcess is a part run as a plain process on this machine (Prometheus,
// kube-state-metrics): its output goes to the log as JSON lines (jsonLines
// wraps what is not JSON, naming the part), so the shared log stays JSON.
type hostProcess struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
}

func startHostProcess(name string, log io.Writer, dieWithParent bool, bin string, args ...string) (*hostProcess, error) {
	cmd := exec.Command(bin, args...)
	out := newJSONLines(log, name)
	cmd.Stdout, cmd.Stderr = out, out
	if dieWithParent {
		cmd.SysProcAttr = childSysProcAttr()
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &hostProcess{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// waitReady polls url until it answers 200, the process exits, or timeout.
func (p *hostProcess) waitReady(ctx context.Context, c *http.Client, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before it was ready (see its log)", p.name)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.New(p.name + " not ready within " + timeout.String())
}

// stop ends the process: SIGTERM, then SIGKILL after 10s.
func (p *hostProcess) stop() {
	if p != nil && p.cmd.Process != nil {
		stopProcess(p.cmd.Process, p.exited, os.Interrupt)
	}
}

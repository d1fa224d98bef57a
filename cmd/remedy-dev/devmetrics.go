package main

import (
	"fmt"
	"strings"

	"github.com/remedy-dev/remedy/internal/cli"
)

// devMetrics are the /metrics endpoints remedy-dev serves on the ports
// the separate processes use in a cluster.
type devMetrics struct {
	stops []func()
	urls  []string
}

// serveDevMetrics serves the registry on each address that is not "0". The
// operator, worker and webhook share one process and so one registry: every
// endpoint shows all their metrics.
func serveDevMetrics(ports []fixedPort) (*devMetrics, error) {
	m := &devMetrics{}
	for _, p := range ports {
		stop, err := cli.ServeMetrics(p.addr)
		if err != nil {
			m.stop()
			return nil, fmt.Errorf("%s on %s (choose another with --%s): %w", p.part, p.addr, p.flag, err)
		}
		m.stops = append(m.stops, stop)
		if p.addr != "0" {
			m.urls = append(m.urls, fmt.Sprintf("%s http://%s/metrics", strings.TrimSuffix(p.part, " metrics"), p.addr))
		}
	}
	return m, nil
}

func (m *devMetrics) stop() {
	for _, stop := range m.stops {
		stop()
	}
}

// banner lists the endpoints for the ready banner.
func (m *devMetrics) banner() string {
	if len(m.urls) == 0 {
		return "none (--*-metrics-addr 0)"
	}
	return strings.Join(m.urls, "\n                   ") + "\n                   (one process here: each endpoint shows every part's metrics)"
}

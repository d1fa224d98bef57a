package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/remedy-dev/remedy/internal/devenv"
)

// startMonitoring runs kube-state-metrics and Prometheus (unless
// --prometheus-addr is 0), which evaluates the standard alerts with
// --alert-for and sends to am. It returns Prometheus's URL, or "".
func (s *session) startMonitoring(ctx context.Context, am *devenv.Alertmanager) (string, error) {
	if s.f.promAddr == "0" {
		return "", nil
	}
	jobs := "kube-state-metrics and the API server"
	if s.env.HasNode() {
		jobs += " and the kubelet"
	}
	done := step(fmt.Sprintf("starting kube-state-metrics on %s and Prometheus on %s (scraping %s every %s; the standard alerts with for: %s)",
		s.f.ksmAddr, s.f.promAddr, jobs, s.f.interval, forSetting(s.f.alertFor)))
	prom, ksm, err := devenv.MonitoringBinaries(s.f.root)
	if err != nil {
		return "", err
	}
	rules, err := devenv.StandardAlerts(s.f.root, s.f.alertFor)
	if err != nil {
		return "", err
	}
	m, err := s.env.StartMonitoring(ctx, devenv.MonitoringOptions{Prometheus: prom, KubeStateMetrics: ksm,
		Rules:             map[string][]byte{filepath.Base(devenv.KubernetesAlertsFile): rules},
		Alertmanager:      am,
		PrometheusAddress: s.f.promAddr, KubeStateMetricsAddress: s.f.ksmAddr,
		ScrapeInterval: s.f.interval, EvaluationInterval: s.f.interval,
		Log: s.log, DieWithParent: true})
	if err != nil {
		return "", err
	}
	s.onExit(func() { _ = m.Stop() })
	done()
	return m.PrometheusURL, nil
}

func forSetting(alertFor string) string {
	if alertFor == "" {
		return "as shipped"
	}
	return alertFor
}

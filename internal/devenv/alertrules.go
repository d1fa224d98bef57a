package devenv

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"
)

// KubernetesAlertsFile is the PrometheusRule of the standard Kubernetes
// alerts (KubePodCrashLooping and the rest), relative to the repository root:
// shipped to users, and loaded by `make dev` through DevRuleFile.
const KubernetesAlertsFile = "deploy/monitoring/kubernetes-alerts.yaml"

// DefaultAlertFor is the `for:` dev gives the standard alerts (remedy-dev
// --alert-for): their real 15m and 1h would keep a demo waiting.
const DefaultAlertFor = "1m"

// DevRuleFile turns a PrometheusRule into the rule file Prometheus loads: its
// spec, unchanged but for every alert's `for:`, which becomes alertFor (a
// Prometheus duration) when that is not empty. Dev reads the shipped file at
// every start, so dev and users evaluate the same expressions, labels and
// annotations.
func DevRuleFile(prometheusRule []byte, alertFor string) ([]byte, error) {
	if alertFor != "" {
		if _, err := model.ParseDuration(alertFor); err != nil {
			return nil, fmt.Errorf("parse alert for %q: %w", alertFor, err)
		}
	}
	var rule struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(prometheusRule, &rule); err != nil {
		return nil, fmt.Errorf("parse PrometheusRule: %w", err)
	}
	if rule.Kind != "PrometheusRule" || len(rule.Spec.Groups) == 0 {
		return nil, fmt.Errorf("parse PrometheusRule: kind %q with %d groups, want a PrometheusRule with groups", rule.Kind, len(rule.Spec.Groups))
	}
	for _, g := range rule.Spec.Groups {
		rules, _ := g["rules"].([]any)
		for _, r := range rules {
			m, ok := r.(map[string]any)
			if !ok || m["alert"] == nil || alertFor == "" {
				continue
			}
			m["for"] = alertFor
		}
	}
	out, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	if err != nil {
		return nil, fmt.Errorf("render rule file: %w", err)
	}
	return out, nil
}

// StandardAlerts is repoRoot's KubernetesAlertsFile as a rule file with
// alertFor (DevRuleFile).
func StandardAlerts(repoRoot, alertFor string) ([]byte, error) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, KubernetesAlertsFile))
	if err != nil {
		return nil, fmt.Errorf("read the standard alerts: %w", err)
	}
	out, err := DevRuleFile(raw, alertFor)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KubernetesAlertsFile, err)
	}
	return out, nil
}

// Package monitoring_test runs promtool's unit tests on the shipped alerts
// and checks that every query in the alerts and the dashboard names a metric
// Remedy or its Temporal SDK exports.
package monitoring_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/remedy-dev/remedy/internal/metrics"
)

type prometheusRule struct {
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// ruleFiles are the shipped PrometheusRules, each with its promtool tests
// and the name the tests' rule_files give its spec.
var ruleFiles = []struct{ rule, tests, spec string }{
	{"prometheusrule.yaml", "rules_test.yaml", "remedy.rules.yaml"},
	{"kubernetes-alerts.yaml", "kubernetes-alerts_test.yaml", "kubernetes.rules.yaml"},
}

func readRule(t *testing.T, file string) (prometheusRule, []byte) {
	t.Helper()
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var r prometheusRule
	require.NoError(t, yaml.Unmarshal(raw, &r))
	// promtool reads a plain rule file: the PrometheusRule's spec, as written.
	var whole map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &whole))
	require.Equal(t, "PrometheusRule", whole["kind"])
	spec, err := yaml.Marshal(whole["spec"])
	require.NoError(t, err)
	return r, spec
}

// promtool is the pinned binary `make tools` builds (hack/tools/install.sh
// prometheus), or $PROMTOOL.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p
	}
	f, err := os.Open(filepath.Join("..", "..", "hack", "tools", "versions.env"))
	require.NoError(t, err)
	defer f.Close()
	pinned := map[string]string{}
	for s := bufio.NewScanner(f); s.Scan(); {
		if k, v, ok := strings.Cut(s.Text(), "="); ok {
			pinned[k] = v
		}
	}
	require.NotEmpty(t, pinned["PROMETHEUS_VERSION"], "versions.env pins PROMETHEUS_VERSION")
	home, err := os.UserHomeDir()
	require.NoError(t, err)
	p := filepath.Join(home, ".cache", "remedy", "tools", "prometheus-"+pinned["PROMETHEUS_VERSION"]+"-"+pinned["PROMETHEUS_BUILD"], "promtool")
	_, err = os.Stat(p)
	require.NoError(t, err, "promtool is missing: run `make tools` (or set PROMTOOL)")
	return p
}

func TestAlertRulesPassPromtool(t *testing.T) {
	bin := promtool(t)
	for _, f := range ruleFiles {
		t.Run(f.rule, func(t *testing.T) {
			_, spec := readRule(t, f.rule)
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, f.spec), spec, 0o600))
			tests, err := os.ReadFile(f.tests)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, f.tests), tests, 0o600))
			for _, args := range [][]string{{"check", "rules", f.spec}, {"test", "rules", f.tests}} {
				cmd := exec.Command(bin, args...)
				cmd.Dir = dir
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
			}
		})
	}
}

// Every alert has at least one promtool test case.
func TestEveryAlertIsTested(t *testing.T) {
	for _, f := range ruleFiles {
		r, _ := readRule(t, f.rule)
		tests, err := os.ReadFile(f.tests)
		require.NoError(t, err)
		for _, g := range r.Spec.Groups {
			for _, rule := range g.Rules {
				assert.Contains(t, string(tests), "alertname: "+rule.Alert+"\n", "%s tests %s", f.tests, rule.Alert)
			}
		}
	}
}

// The standard alerts keep kubernetes-mixin's names and `for:`, so a user's
// Prometheus running the mixin sends Remedy the same alerts.
func TestKubernetesAlertsKeepTheMixinsNames(t *testing.T) {
	raw, err := os.ReadFile("kubernetes-alerts.yaml")
	require.NoError(t, err)
	var r struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert string `json:"alert"`
					For   string `json:"for"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &r))
	got := map[string]string{}
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			got[rule.Alert] = rule.For
		}
	}
	assert.Equal(t, map[string]string{"KubePodCrashLooping": "15m", "KubeContainerWaiting": "1h",
		"KubeDeploymentReplicasMismatch": "15m", "KubePodNotReady": "15m"}, got)
}

func TestQueriesNameExportedMetrics(t *testing.T) {
	known := exported(t)
	r, _ := readRule(t, "prometheusrule.yaml")
	var exprs []string
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			exprs = append(exprs, rule.Expr)
		}
	}
	exprs = append(exprs, dashboardExprs(t)...)
	require.Greater(t, len(exprs), 20)
	for _, e := range exprs {
		names := metricNames(e)
		assert.NotEmpty(t, names, "%q names a metric", e)
		for _, n := range names {
			assert.True(t, known(n), "%q: %s is not a metric Remedy exports", e, n)
		}
	}
}

func TestMetricNamesOfQueries(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`sum by (scope) (increase(remedy_configmap_reload_errors_total{scope=~"a|b"}[15m])) > 2`, []string{"remedy_configmap_reload_errors_total"}},
		{`histogram_quantile(0.95, sum by (le, phase) (rate(remedy_execution_phase_duration_seconds_bucket[5m])))`, []string{"remedy_execution_phase_duration_seconds_bucket"}},
		{`sum(x_total) < 1 or absent(y)`, []string{"x_total", "y"}},
		{`sum without (pod) (z) / on (env) group_left w`, []string{"z", "w"}},
	} {
		assert.Equal(t, tc.want, metricNames(tc.expr), tc.expr)
	}
}

// The dashboard shows every Remedy metric (so a new one is not forgotten).
func TestDashboardShowsEveryRemedyMetric(t *testing.T) {
	var shown []string
	for _, e := range dashboardExprs(t) {
		shown = append(shown, metricNames(e)...)
	}
	for _, n := range metrics.Names() {
		if n == "remedy_build_info" {
			continue
		}
		assert.True(t, slices.ContainsFunc(shown, func(s string) bool { return base(s) == n }), "the dashboard shows %s", n)
	}
}

func dashboardExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("dashboard.json")
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &d))
	var exprs []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		require.NotEmpty(t, p.Targets, "panel %q queries something", p.Title)
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

// exported reports whether a name is Remedy's (internal/metrics) or one the
// Temporal SDK emits (its constants, read from the SDK in the module cache).
func exported(t *testing.T) func(string) bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "go.temporal.io/sdk").Output()
	require.NoError(t, err)
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "internal", "common", "metrics", "constants.go"))
	require.NoError(t, err)
	var sdk []string
	for _, m := range regexp.MustCompile(`TemporalMetricsPrefix \+ "([a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		sdk = append(sdk, "temporal_"+m[1])
	}
	require.Contains(t, sdk, "temporal_workflow_task_execution_failed")
	remedy := metrics.Names()
	return func(n string) bool {
		return slices.Contains(remedy, base(n)) || slices.Contains(sdk, base(n))
	}
}

// base strips the series suffixes of a histogram.
func base(n string) string {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(n, s); ok {
			return b
		}
	}
	return n
}

var (
	strLit     = regexp.MustCompile(`"[^"]*"`)
	matchers   = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	grouping   = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	keywords   = []string{"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"}
)

// metricNames returns the metric names a PromQL expression selects: the
// identifiers left once strings, label matchers, ranges, grouping clauses,
// function calls and keywords are taken out.
func metricNames(expr string) []string {
	e := grouping.ReplaceAllString(matchers.ReplaceAllString(strLit.ReplaceAllString(expr, ""), ""), "")
	var names []string
	for _, m := range identifier.FindAllString(e, -1) {
		if strings.HasSuffix(m, "(") || slices.Contains(keywords, m) {
			continue
		}
		names = append(names, m)
	}
	return names
}

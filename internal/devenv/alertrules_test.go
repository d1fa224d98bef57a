package devenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// TestDevRuleFileDiffersOnlyInFor: dev's rule file is the shipped
// PrometheusRule's spec with each alert's `for:` replaced, nothing else, so
// the two cannot drift apart.
func TestDevRuleFileDiffersOnlyInFor(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", KubernetesAlertsFile))
	require.NoError(t, err)
	var shipped struct {
		Spec map[string]any `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &shipped))

	for _, alertFor := range []string{"1m", "30s", ""} {
		t.Run("for="+alertFor, func(t *testing.T) {
			out, err := DevRuleFile(raw, alertFor)
			require.NoError(t, err)
			var dev map[string]any
			require.NoError(t, yaml.Unmarshal(out, &dev))
			want := copyJSON(t, shipped.Spec)
			alerts := 0
			for _, g := range want["groups"].([]any) {
				for _, r := range g.(map[string]any)["rules"].([]any) {
					m := r.(map[string]any)
					require.Contains(t, m, "for", "every standard alert has a for")
					if alertFor != "" {
						m["for"] = alertFor
					}
					alerts++
				}
			}
			assert.Equal(t, 4, alerts)
			assert.Equal(t, want, dev)
		})
	}
}

func TestDevRuleFileRefusesBadInput(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", KubernetesAlertsFile))
	require.NoError(t, err)
	_, err = DevRuleFile(raw, "1.5m")
	assert.ErrorContains(t, err, "parse alert for")
	_, err = DevRuleFile([]byte("kind: ConfigMap\n"), "1m")
	assert.ErrorContains(t, err, "want a PrometheusRule")
}

func copyJSON(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	b, err := yaml.Marshal(v)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, yaml.Unmarshal(b, &out))
	return out
}

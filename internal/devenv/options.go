package devenv

import (
	"fmt"
	"os"
	"path/filepath"
)

// OptionsFromEnv fills the binary paths from KUBEBUILDER_ASSETS and
// TEMPORAL_CLI, and where one is unset, from the tools cache (ToolsCache) at
// the versions repoRoot pins (CachedTools), where `make tools` builds them.
func OptionsFromEnv(repoRoot string) (Options, error) {
	o := Options{
		Assets:      os.Getenv("KUBEBUILDER_ASSETS"),
		TemporalCLI: os.Getenv("TEMPORAL_CLI"),
		CRDDir:      filepath.Join(repoRoot, "deploy", "crd"),
		OperatorWebhooks: []string{
			filepath.Join(repoRoot, "deploy", "webhook", "approval.yaml"),
			filepath.Join(repoRoot, "deploy", "webhook", "requester.yaml"),
			filepath.Join(repoRoot, "deploy", "webhook", "policy.yaml"),
		},
	}
	if o.Assets == "" || o.TemporalCLI == "" {
		cache, err := ToolsCache()
		if err != nil {
			return o, err
		}
		assets, temporalCLI, err := CachedTools(repoRoot, cache)
		if err != nil {
			return o, fmt.Errorf("KUBEBUILDER_ASSETS or TEMPORAL_CLI is not set, and the tools cache cannot be searched: %w", err)
		}
		if o.Assets == "" {
			o.Assets = assets
		}
		if o.TemporalCLI == "" {
			o.TemporalCLI = temporalCLI
		}
	}
	for _, p := range []string{filepath.Join(o.Assets, "kube-apiserver"), filepath.Join(o.Assets, "etcd"), filepath.Join(o.Assets, "kubectl"), o.TemporalCLI} {
		if _, err := os.Stat(p); err != nil {
			return o, fmt.Errorf("missing %s: build the pinned binaries with `make tools` (or hack/tools/install.sh kubernetes temporal), or set KUBEBUILDER_ASSETS and TEMPORAL_CLI: %w", p, err)
		}
	}
	return o, nil
}

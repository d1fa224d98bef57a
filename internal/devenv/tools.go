package devenv

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// VersionsFile is where the pinned tool versions live, relative to the
// repository root; the Makefile and hack/tools/install.sh read it too.
const VersionsFile = "hack/tools/versions.env"

// ToolsCache is the directory hack/tools/install.sh builds the pinned
// binaries into: $REMEDY_TOOLS_CACHE, else ~/.cache/remedy/tools.
func ToolsCache() (string, error) {
	if dir := os.Getenv("REMEDY_TOOLS_CACHE"); dir != "" {
		return dir, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the tools cache: %w", err)
	}
	return filepath.Join(home, ".cache", "remedy", "tools"), nil
}

// PinnedVersions reads the NAME=VALUE lines of the repository's versions file.
func PinnedVersions(repoRoot string) (map[string]string, error) {
	path := filepath.Join(repoRoot, VersionsFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read pinned versions: %w", err)
	}
	defer f.Close()
	versions := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("parse %s: line %q is not NAME=VALUE", path, line)
		}
		versions[strings.TrimSpace(name)] = strings.TrimSpace(value)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return versions, nil
}

// CachedTools are the paths hack/tools/install.sh gives the pinned
// Kubernetes binaries (a directory, as KUBEBUILDER_ASSETS) and the temporal
// CLI in cache, at the versions of repoRoot's versions file.
func CachedTools(repoRoot, cache string) (assets, temporalCLI string, err error) {
	v, err := PinnedVersions(repoRoot)
	if err != nil {
		return "", "", err
	}
	kube, temporal := v["KUBERNETES_VERSION"], v["TEMPORAL_CLI_VERSION"]
	if kube == "" || temporal == "" {
		return "", "", fmt.Errorf("%s lacks KUBERNETES_VERSION or TEMPORAL_CLI_VERSION", filepath.Join(repoRoot, VersionsFile))
	}
	return filepath.Join(cache, KubernetesDir(v)), filepath.Join(cache, "temporal-"+temporal, "temporal"), nil
}

// KubernetesDir names the cache directory of the pinned Kubernetes binaries:
// the version and, when set, the build of install.sh that made them.
func KubernetesDir(versions map[string]string) string {
	dir := "kubernetes-" + versions["KUBERNETES_VERSION"]
	if b := versions["KUBERNETES_BUILD"]; b != "" {
		dir += "-" + b
	}
	return dir
}

// CachedContainerd is the directory hack/tools/install.sh node builds
// containerd, its runc shim and ctr into.
func CachedContainerd(repoRoot, cache string) (string, error) {
	v, err := PinnedVersions(repoRoot)
	if err != nil {
		return "", err
	}
	if v["CONTAINERD_VERSION"] == "" {
		return "", fmt.Errorf("%s lacks CONTAINERD_VERSION", filepath.Join(repoRoot, VersionsFile))
	}
	return filepath.Join(cache, "containerd-"+v["CONTAINERD_VERSION"]), nil
}

// MonitoringBinaries are the pinned prometheus and kube-state-metrics
// (hack/tools/install.sh prometheus kube-state-metrics builds them into the
// tools cache), or $PROMETHEUS and $KUBE_STATE_METRICS where set.
func MonitoringBinaries(repoRoot string) (prometheus, kubeStateMetrics string, err error) {
	prometheus, kubeStateMetrics = os.Getenv("PROMETHEUS"), os.Getenv("KUBE_STATE_METRICS")
	if prometheus == "" || kubeStateMetrics == "" {
		cache, err := ToolsCache()
		if err != nil {
			return "", "", err
		}
		v, err := PinnedVersions(repoRoot)
		if err != nil {
			return "", "", err
		}
		if v["PROMETHEUS_VERSION"] == "" || v["PROMETHEUS_BUILD"] == "" || v["KUBE_STATE_METRICS_VERSION"] == "" {
			return "", "", fmt.Errorf("%s lacks PROMETHEUS_VERSION, PROMETHEUS_BUILD or KUBE_STATE_METRICS_VERSION", filepath.Join(repoRoot, VersionsFile))
		}
		if prometheus == "" {
			prometheus = filepath.Join(cache, PrometheusDir(v), "prometheus")
		}
		if kubeStateMetrics == "" {
			kubeStateMetrics = filepath.Join(cache, "kube-state-metrics-"+v["KUBE_STATE_METRICS_VERSION"], "kube-state-metrics")
		}
	}
	for _, p := range []string{prometheus, kubeStateMetrics} {
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("missing %s: build it with `make tools` (or hack/tools/install.sh prometheus kube-state-metrics): %w", p, err)
		}
	}
	return prometheus, kubeStateMetrics, nil
}

// PrometheusDir names the cache directory of the pinned prometheus and
// promtool: the version and the build of install.sh that made them (an older
// build held promtool alone).
func PrometheusDir(versions map[string]string) string {
	return "prometheus-" + versions["PROMETHEUS_VERSION"] + "-" + versions["PROMETHEUS_BUILD"]
}

package metrics

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// BuildInfo is always 1; its labels say which build serves the endpoint (the
// seed's configmap_reload info metric, served by every process).
var BuildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "remedy_build_info",
	Help: "Build metadata of this Remedy binary: module version, VCS revision and Go version. Always 1.",
}, []string{"version", "revision", "go_version"})

func init() {
	version, revision := "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	BuildInfo.WithLabelValues(version, revision, runtime.Version()).Set(1)
	register(BuildInfo)
}

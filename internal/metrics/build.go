package metrics

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/remedy-dev/remedy/internal/release"
)

// BuildInfo is always 1; its labels say which build serves the endpoint (the
// configmap_reload info metric, served by every process).
var BuildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "remedy_build_info",
	Help: "Build metadata of this Remedy binary: release version (the VERSION file), VCS revision and Go version. Always 1.",
}, []string{"version", "revision", "go_version"})

func init() {
	BuildInfo.WithLabelValues(release.Version, release.Revision, runtime.Version()).Set(1)
	register(BuildInfo)
}

package metrics

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/internal/release"
)

// remedy_build_info carries the same version and revision as `remedy version`.
func TestBuildInfoIsTheRelease(t *testing.T) {
	require.NotEmpty(t, release.Version)
	want := `
# HELP remedy_build_info Build metadata of this Remedy binary: release version (the VERSION file), VCS revision and Go version. Always 1.
# TYPE remedy_build_info gauge
remedy_build_info{go_version="` + runtime.Version() + `",revision="` + release.Revision + `",version="` + release.Version + `"} 1
`
	assert.NoError(t, testutil.CollectAndCompare(BuildInfo, strings.NewReader(want)))
}

package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/remedy-dev/remedy/internal/release"
	"github.com/remedy-dev/remedy/worker"
)

// Every image under deploy/ and in temporal-dev.yaml is pinned by version,
// and every reference to Remedy's own image names the one `make image` tags.
func TestImagesPinned(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("*", "*.yaml"))
	require.NoError(t, err)
	nested, err := filepath.Glob(filepath.Join("*", "*", "*.yaml"))
	require.NoError(t, err)
	files = append(append(files, nested...), filepath.Join("..", "temporal-dev.yaml"))
	// The Helm chart is generated from the rest and templates the image
	// (hack/genchart's tests check it).
	files = slices.DeleteFunc(files, func(f string) bool { return strings.HasPrefix(f, "helm"+string(filepath.Separator)) })
	ownRef := regexp.MustCompile(regexp.QuoteMeta(release.Repository) + `[^\s,\]"')]*`)
	imageField := regexp.MustCompile(`^\s*(?:- )?image:\s*(\S+)`)
	own := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, line := range strings.Split(string(raw), "\n") {
			assert.NotContains(t, line, ":latest", "%s:%d", f, i+1)
			for _, m := range ownRef.FindAllString(line, -1) {
				if filepath.Base(f) == "kustomization.yaml" {
					continue // names the repository for images:, checked below
				}
				own++
				assert.Equal(t, release.Image(), m, "%s:%d", f, i+1)
			}
			if m := imageField.FindStringSubmatch(line); m != nil {
				name := m[1][strings.LastIndex(m[1], "/")+1:]
				assert.Regexp(t, `[:@].+`, name, "%s:%d: image without a tag", f, i+1)
			}
		}
	}
	assert.GreaterOrEqual(t, own, 5, "three Deployments, --exec-image and remedy-exec-image")
	assert.Equal(t, release.Image(), worker.DefaultExecImage)

	var k struct {
		Images []struct{ Name, NewTag string } `json:"images"`
	}
	raw, err := os.ReadFile(filepath.Join("manager", "kustomization.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &k))
	require.Len(t, k.Images, 1, "deploy/manager pins the image through kustomize")
	assert.Equal(t, release.Repository, k.Images[0].Name)
	assert.Equal(t, release.Version, k.Images[0].NewTag)
}

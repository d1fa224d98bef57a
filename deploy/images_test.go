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

	"github.com/remedy-dev/remedy/internal/image"
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

// imageRef finds an image reference in a manifest or a shell line: an image:
// field (also in a flow mapping or JSON), --image=, or --exec-image=.
var imageRef = regexp.MustCompile(`(?:^|[\s{,"])"?image"?:\s*"?([^\s",}]+)|--(?:exec-)?image[= ]([^\s",\]]+)`)

// Every image that deploy/ (the samples among it) and the shell and YAML
// blocks of README.md and docs/ name is one the node has without a pull (it
// never contacts a registry): Remedy's image under its two names, or the
// pause image. The Helm chart templates its image from values.yaml's
// repository and the chart's appVersion (hack/genchart checks them).
func TestImagesBuiltLocally(t *testing.T) {
	local := image.LocalReferences()
	var files []string
	require.NoError(t, filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (p == "helm" || p == "crd"):
			return filepath.SkipDir // templates; schemas that name the field
		case strings.HasSuffix(p, ".yaml"):
			files = append(files, p)
		}
		return nil
	}))
	docs, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	require.NoError(t, err)
	files = append(append(files, filepath.Join("..", "README.md")), docs...)
	seen := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for n, line := range codeLines(f, string(raw)) {
			for _, m := range imageRef.FindAllStringSubmatch(line, -1) {
				ref := m[1] + m[2]
				if strings.ContainsAny(ref, "<$") {
					continue // a placeholder the reader fills in
				}
				seen++
				assert.Contains(t, local, ref, "%s:%d names an image the node does not have (make image builds %v)", f, n, local)
			}
		}
	}
	assert.GreaterOrEqual(t, seen, 7, "the scan found the image references")
}

// codeLines are a file's lines by number: all of a YAML file's, and only
// those inside a markdown file's fenced blocks (prose may say "image:").
func codeLines(path, text string) map[int]string {
	out := map[int]string{}
	inFence := !strings.HasSuffix(path, ".md")
	for i, line := range strings.Split(text, "\n") {
		if strings.HasSuffix(path, ".md") && strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence && !strings.HasPrefix(strings.TrimSpace(line), "#") {
			out[i+1] = line
		}
	}
	return out
}

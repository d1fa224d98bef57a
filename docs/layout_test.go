package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The layout in development.md names every package, so a package moved or
// added without a line saying what it owns fails here.
func TestLayoutNamesEveryPackage(t *testing.T) {
	listed := layoutEntries(t)
	require.NotEmpty(t, listed)
	root := ".."
	var missing []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() || path == root {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
			return filepath.SkipDir
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel) + "/"
		if hasGo(t, path) && !covered(listed, rel) {
			missing = append(missing, rel)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Empty(t, missing, "docs/development.md's Layout must give each package a line")
	for _, e := range listed {
		dir := filepath.Join(root, strings.TrimSuffix(strings.TrimSuffix(e, "..."), "/"))
		assert.DirExists(t, dir, "docs/development.md's Layout names %s", e)
	}
}

// layoutEntries are the first words of the Layout block's lines.
func layoutEntries(t *testing.T) []string {
	b, err := os.ReadFile("development.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "\n## Layout\n")
	require.True(t, ok, "development.md has a Layout section")
	parts := strings.SplitN(section, "```", 3)
	require.Len(t, parts, 3, "the Layout section holds a code block")
	var out []string
	for _, line := range strings.Split(parts[1], "\n") {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(f[0], "#") {
			out = append(out, f[0])
		}
	}
	return out
}

// covered: a line names the directory itself, or "<prefix>/..." covers it.
func covered(listed []string, dir string) bool {
	for _, e := range listed {
		if e == dir || strings.HasSuffix(e, "/...") && strings.HasPrefix(dir, strings.TrimSuffix(e, "...")) {
			return true
		}
	}
	return false
}

func hasGo(t *testing.T, dir string) bool {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	return len(names) > 0
}

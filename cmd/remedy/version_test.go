package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/internal/release"
)

// `remedy version`, --version and the kubectl plugin's print the VERSION
// file's version and the revision the build stamped, on one line.
func TestVersionOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("-short (make test-unit): builds the binary; make test runs it")
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "VERSION"))
	require.NoError(t, err)
	version := strings.TrimSpace(string(raw))
	require.Regexp(t, `^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`, version, "VERSION is a semantic version with a v")
	assert.Equal(t, version, release.Version)

	dir := t.TempDir()
	bin := filepath.Join(dir, "remedy")
	build := exec.Command("go", "build", "-ldflags", release.RevisionFlag("0123456789abcdef"), "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	plugin := filepath.Join(dir, "kubectl-remedy")
	require.NoError(t, os.Symlink(bin, plugin))

	want := "remedy " + version + " (revision 0123456789abcdef, " + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	for _, args := range [][]string{{bin, "version"}, {bin, "--version"}, {plugin, "version"}, {plugin, "--version"}} {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		require.NoError(t, err, "%v: %s", args, out)
		assert.Equal(t, want, string(out), "%s %s", filepath.Base(args[0]), args[1])
	}
	out, err = exec.Command(bin, "--help").CombinedOutput()
	require.NoError(t, err)
	assert.Regexp(t, regexp.MustCompile(`(?m)^  version +print the version`), string(out), "the usage lists it")
}

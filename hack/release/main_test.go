package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/remedy-dev/remedy/internal/install"
	"github.com/remedy-dev/remedy/internal/release"
)

// `make release` as CI runs it on a fresh clone: every artifact is there,
// SHA256SUMS verifies them, the install manifest names the image only by
// the tarball's digest and is otherwise deploy/ as README installs it, the
// plugin archives hold a binary for their platform that the Krew manifest
// names by checksum, and the linux/amd64 one says this version.
func TestMakeRelease(t *testing.T) {
	if testing.Short() && os.Getenv("REMEDY_RELEASE_DIST") == "" {
		t.Skip("-short (make test-unit): make release cross-compiles three platforms, minutes; make test runs it")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	// REMEDY_RELEASE_DIST checks a release already written (by `make
	// release` of this tree) instead of writing one.
	dist, revision := os.Getenv("REMEDY_RELEASE_DIST"), `[0-9a-f]{40}(-dirty)?`
	if dist == "" {
		dist = t.TempDir()
		start := time.Now()
		cmd := exec.Command("make", "-C", root, "release", "DIST="+dist)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "make release: %s", out)
		t.Logf("make release (%.0fs):\n%s", time.Since(start).Seconds(), out)
		rev, err := release.HeadRevision(t.Context(), root)
		require.NoError(t, err)
		revision = regexp.QuoteMeta(rev)
	}

	want := []string{ChecksumFile, CRDsFile, ImageFile, InstallFile, KrewFile}
	for _, p := range Platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		want = append(want, PluginArchive(goos, goarch))
	}
	sort.Strings(want)
	entries, err := os.ReadDir(dist)
	require.NoError(t, err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	require.Equal(t, want, got, "the release's files")

	t.Run("SHA256SUMS verifies every other file", func(t *testing.T) {
		f, err := os.Open(filepath.Join(dist, ChecksumFile))
		require.NoError(t, err)
		defer f.Close()
		listed := map[string]bool{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			sum, file, ok := strings.Cut(sc.Text(), "  ")
			require.True(t, ok, "sha256sum's format: %q", sc.Text())
			assert.Equal(t, sum, fileSum(t, filepath.Join(dist, file)), file)
			listed[file] = true
		}
		require.NoError(t, sc.Err())
		assert.Len(t, listed, len(want)-1)
		// and as a person checks it
		check := exec.Command("sha256sum", "--check", "--strict", ChecksumFile)
		check.Dir = dist
		out, err := check.CombinedOutput()
		assert.NoError(t, err, "%s", out)
	})

	t.Run("the install manifest pins the tarball's image by digest", func(t *testing.T) {
		tag, err := name.NewTag(release.Image())
		require.NoError(t, err)
		img, err := tarball.ImageFromPath(filepath.Join(dist, ImageFile), &tag)
		require.NoError(t, err, "the tarball carries the version's tag")
		digest, err := img.Digest()
		require.NoError(t, err)
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, release.Version, cf.Config.Labels["org.opencontainers.image.version"])

		raw, err := os.ReadFile(filepath.Join(dist, InstallFile))
		require.NoError(t, err)
		refs := regexp.MustCompile(regexp.QuoteMeta(release.Repository)+`[^\s"',\]]*`).FindAllString(string(raw), -1)
		assert.Len(t, refs, 5, "three Deployments, --exec-image and the exec-image ConfigMap")
		for _, r := range refs {
			assert.Equal(t, release.Image()+"@"+digest.String(), r)
		}

		// Apart from the digest, it is deploy/ as README's procedure applies it.
		objs, err := install.Decode(raw)
		require.NoError(t, err)
		deployed, err := install.All(root)
		require.NoError(t, err)
		for i := range deployed {
			deployed[i] = replaceStrings(deployed[i], release.Image(), release.Image()+"@"+digest.String()).(install.Object)
		}
		assert.Equal(t, deployed, objs)

		crds, err := os.ReadFile(filepath.Join(dist, CRDsFile))
		require.NoError(t, err)
		objs, err = install.Decode(crds)
		require.NoError(t, err)
		files, err := filepath.Glob(filepath.Join(root, "deploy", "crd", "*.yaml"))
		require.NoError(t, err)
		require.Len(t, objs, len(files), "one CRD per file of deploy/crd")
		for _, o := range objs {
			assert.Equal(t, "CustomResourceDefinition", o["kind"])
		}
	})

	t.Run("kubectl-remedy for each platform, named by the Krew manifest", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join(dist, KrewFile))
		require.NoError(t, err)
		var plugin struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct{ Name string }
			Spec       struct {
				Version, Homepage, ShortDescription, Description string
				Platforms                                        []struct {
					Selector struct {
						MatchLabels map[string]string `json:"matchLabels"`
					}
					URI, SHA256, Bin string
				}
			}
		}
		require.NoError(t, yaml.UnmarshalStrict(raw, &plugin))
		assert.Equal(t, "krew.googlecontainertools.github.com/v1alpha2", plugin.APIVersion)
		assert.Equal(t, "Plugin", plugin.Kind)
		assert.Equal(t, "remedy", plugin.Metadata.Name)
		assert.Equal(t, release.Version, plugin.Spec.Version)
		assert.NotEmpty(t, plugin.Spec.ShortDescription)
		assert.NotEmpty(t, plugin.Spec.Description)
		require.Len(t, plugin.Spec.Platforms, len(Platforms))
		for i, p := range Platforms {
			goos, goarch, _ := strings.Cut(p, "/")
			pl := plugin.Spec.Platforms[i]
			archive := PluginArchive(goos, goarch)
			assert.Equal(t, map[string]string{"os": goos, "arch": goarch}, pl.Selector.MatchLabels)
			assert.Equal(t, "kubectl-remedy", pl.Bin)
			assert.Equal(t, fileSum(t, filepath.Join(dist, archive)), pl.SHA256, archive)
			assert.True(t, strings.HasSuffix(pl.URI, "/"+release.Version+"/"+archive), pl.URI)

			bin := unpackPlugin(t, filepath.Join(dist, archive))
			switch goos {
			case "linux":
				f, err := elf.Open(bin)
				require.NoError(t, err, archive)
				assert.Equal(t, map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[goarch], f.Machine, archive)
				f.Close()
			case "darwin":
				f, err := macho.Open(bin)
				require.NoError(t, err, archive)
				assert.Equal(t, macho.CpuArm64, f.Cpu, archive)
				f.Close()
			}
			if p == "linux/amd64" {
				out, err := exec.Command(bin, "version").CombinedOutput()
				require.NoError(t, err, "%s", out)
				assert.Regexp(t, `^remedy `+regexp.QuoteMeta(release.Version)+` \(revision `+revision+`, go`, string(out))
			}
		}
	})
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	require.NoError(t, err)
	return hex.EncodeToString(h.Sum(nil))
}

// unpackPlugin extracts the archive's one file, kubectl-remedy, and returns its path.
func unpackPlugin(t *testing.T, archive string) string {
	t.Helper()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	hdr, err := tr.Next()
	require.NoError(t, err)
	require.Equal(t, "kubectl-remedy", hdr.Name)
	assert.Equal(t, int64(0o755), hdr.Mode&0o777)
	path := filepath.Join(t.TempDir(), "kubectl-remedy")
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, tr)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	_, err = tr.Next()
	assert.ErrorIs(t, err, io.EOF, "the archive holds only kubectl-remedy")
	return path
}

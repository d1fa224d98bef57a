package image_test

import (
	"archive/tar"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/internal/image"
	"github.com/remedy-dev/remedy/internal/release"
)

// The image as `make image` writes it, read back from the tarball by its
// tag, unpacked, and /remedy run from the image's own filesystem as its user.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short (make test-unit): builds the binary; make test runs it")
	}
	bin, err := image.BuildBinary(context.Background(), filepath.Join("..", ".."), runtime.GOARCH, "test", t.TempDir())
	require.NoError(t, err)
	raw, err := os.ReadFile(bin)
	require.NoError(t, err)
	built, err := image.Build(raw, runtime.GOARCH)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "remedy.tar")
	require.NoError(t, image.WriteTarball(built, path))
	st, err := os.Stat(path)
	require.NoError(t, err)
	t.Logf("image tarball %s: %.1f MiB", release.Image(), float64(st.Size())/(1<<20))

	tag, err := name.NewTag(release.Image())
	require.NoError(t, err)
	img, err := tarball.ImageFromPath(path, &tag)
	require.NoError(t, err, "the tarball carries the pinned tag")
	again, err := image.Build(raw, runtime.GOARCH)
	require.NoError(t, err)
	// The tarball's manifest is Docker's; the config (with the layers' diff IDs) is the same.
	assert.Equal(t, configName(t, built), configName(t, img), "the tarball holds the built image")
	assert.Equal(t, digest(t, built), digest(t, again), "one binary, one digest")

	node := filepath.Join(t.TempDir(), "remedy-node.tar")
	require.NoError(t, image.WriteNodeTarball(built, node))
	for _, ref := range []string{release.Image(), image.DemoReference()} {
		tag, err := name.NewTag(ref)
		require.NoError(t, err)
		named, err := tarball.ImageFromPath(node, &tag)
		require.NoError(t, err, "the node's tarball carries %s", ref)
		assert.Equal(t, configName(t, built), configName(t, named), ref)
	}
	_, err = tarball.ImageFromPath(node, nil)
	require.NoError(t, err, "one image under two names: crane push reads it")

	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "65532:65532", cf.Config.User)
	assert.Equal(t, []string{"/remedy"}, cf.Config.Entrypoint)
	assert.Empty(t, cf.Config.Cmd)
	assert.Equal(t, "linux", cf.OS)
	assert.Equal(t, runtime.GOARCH, cf.Architecture)

	root := unpack(t, img)
	var executables []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 || info.Mode()&0o111 != 0 {
			executables = append(executables, "/"+strings.TrimPrefix(p, root+"/"))
		}
		return nil
	}))
	assert.Equal(t, []string{"/remedy"}, executables, "no shell, no tools, no links: the binary is the only program")

	pemBytes, err := os.ReadFile(filepath.Join(root, "etc", "ssl", "certs", "ca-certificates.crt"))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pemBytes))
	assert.Greater(t, strings.Count(string(pemBytes), "BEGIN CERTIFICATE"), 100, "the NSS roots")
	passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	require.NoError(t, err)
	assert.Contains(t, string(passwd), "nonroot:x:65532:65532:")

	assert.Equal(t, []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}, cf.Config.Env, "no workaround for a binary that writes at start")

	cmd := exec.Command("/remedy", "--help")
	if os.Geteuid() == 0 {
		// Root can run it the way a runtime does: the image's tree as /, its
		// user, the image's environment. The user may write nowhere here but
		// /tmp, and TMPDIR and HOME point where it may not, as on the
		// read-only root of every Pod of this image: a package init that
		// creates a directory (envtest's does) panics.
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
		cmd.Dir = "/"
		cmd.Env = append(cf.Config.Env, "HOME=/home/nonroot", "TMPDIR=/etc")
	} else {
		cmd.Path = filepath.Join(root, "remedy")
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "usage: remedy <command>")
	if os.Geteuid() == 0 {
		sh := exec.Command("/bin/sh", "-c", "true")
		sh.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
		assert.ErrorIs(t, sh.Run(), fs.ErrNotExist, "no /bin/sh to exec")
	}
}

func digest(t *testing.T, img v1.Image) v1.Hash {
	d, err := img.Digest()
	require.NoError(t, err)
	return d
}

func configName(t *testing.T, img v1.Image) v1.Hash {
	d, err := img.ConfigName()
	require.NoError(t, err)
	return d
}

// unpack writes the image's flattened filesystem into a temp dir.
func unpack(t *testing.T, img v1.Image) string {
	root := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return root
		}
		require.NoError(t, err)
		p := filepath.Join(root, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(p, 0o755))
			require.NoError(t, os.Chmod(p, fs.FileMode(h.Mode)&fs.ModePerm|modeBits(h)))
		case tar.TypeReg:
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fs.FileMode(h.Mode)&fs.ModePerm)
			require.NoError(t, err)
			_, err = io.Copy(f, tr)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		default:
			t.Fatalf("%s: unexpected entry type %q in the image", h.Name, h.Typeflag)
		}
	}
}

func modeBits(h *tar.Header) fs.FileMode {
	if h.Mode&0o1000 != 0 {
		return fs.ModeSticky
	}
	return 0
}

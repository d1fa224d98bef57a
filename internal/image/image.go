// Package image assembles Remedy's OCI image without a Docker engine: a
// static binary at /remedy, the Mozilla CA bundle, user 65532 and nothing
// else (no shell, no package manager), the same content as distroless/static.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing/fstest"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"

	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/release"
)

const (
	// Binary is the entrypoint's path inside the image.
	Binary = "/remedy"
	// User is distroless's nonroot; Jobs and Deployments pin it too
	// (runAsNonRoot needs a numeric user).
	User = "65532:65532"
	// CABundle is where Go (and most TLS stacks) look for roots on Linux.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
)

// epoch stamps every file and the config, so one binary gives one digest.
var epoch = time.Unix(0, 0).UTC()

// BuildBinary compiles cmd/remedy statically for linux/arch into dir,
// stamped with revision rev (release.Build).
func BuildBinary(ctx context.Context, repoRoot, arch, rev, dir string) (string, error) {
	out := filepath.Join(dir, "remedy")
	return out, release.Build(ctx, repoRoot, "./cmd/remedy", "linux", arch, rev, out)
}

// Build makes the image around binary: a base layer (CA roots, passwd,
// group, /tmp) and the binary's layer, so a rebuild ships only the latter.
func Build(binary []byte, arch string) (v1.Image, error) {
	base, err := layer(baseFS())
	if err != nil {
		return nil, fmt.Errorf("build base layer: %w", err)
	}
	app, err := layer(fstest.MapFS{Binary[1:]: {Data: binary, Mode: 0o555, ModTime: epoch}})
	if err != nil {
		return nil, fmt.Errorf("build binary layer: %w", err)
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), base, app)
	if err != nil {
		return nil, fmt.Errorf("append layers: %w", err)
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", arch, v1.Time{Time: epoch}
	cf.Config.User = User
	cf.Config.Entrypoint = []string{Binary}
	cf.Config.WorkingDir = "/"
	// Nothing else: the binary (cmd/remedy) writes nothing at start, so it
	// runs on the read-only root every Pod of this image has.
	cf.Config.Env = []string{"SSL_CERT_FILE=" + CABundle}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.source":  "https://github.com/remedy-dev/remedy",
		"org.opencontainers.image.version": release.Version,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	return img, nil
}

// WriteTarball writes img tagged release.Image() as a tarball that
// `docker load`, `podman load` and `crane push` read.
func WriteTarball(img v1.Image, path string) error {
	tag, err := releaseTag()
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteNodeTarball writes img as WriteTarball does, tagged also
// DemoReference(): the tarball `make image` writes for the node, so that the
// node holds a second name of the demo app for set-image to roll to.
func WriteNodeTarball(img v1.Image, path string) error {
	tag, err := releaseTag()
	if err != nil {
		return err
	}
	demo, err := name.NewTag(DemoReference(), name.StrictValidation)
	if err != nil {
		return fmt.Errorf("parse %s: %w", DemoReference(), err)
	}
	if err := tarball.MultiRefWriteToFile(path, map[name.Reference]v1.Image{tag: img, demo: img}); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func releaseTag() (name.Tag, error) {
	tag, err := name.NewTag(release.Image(), name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("parse %s: %w", release.Image(), err)
	}
	return tag, nil
}

func baseFS() fstest.MapFS {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s), Mode: 0o444, ModTime: epoch} }
	dir := func(mode fs.FileMode) *fstest.MapFile {
		return &fstest.MapFile{Mode: fs.ModeDir | mode, ModTime: epoch}
	}
	return fstest.MapFS{
		"etc":               dir(0o755),
		"etc/ssl":           dir(0o755),
		"etc/ssl/certs":     dir(0o755),
		CABundle[1:]:        {Data: caBundle(), Mode: 0o444, ModTime: epoch},
		"etc/passwd":        file("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"),
		"etc/group":         file("root:x:0:\nnonroot:x:65532:\n"),
		"etc/nsswitch.conf": file("hosts: files dns\n"),
		"tmp":               dir(fs.ModeSticky | 0o777),
	}
}

// caBundle is NSS's trust store as PEM, pinned by go.mod through
// x509roots/fallback. Roots with a distrust date need a check PEM cannot
// carry, so they are left out.
func caBundle() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint == nil {
			_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
		}
	}
	return b.Bytes()
}

// layer serializes fsys with the standard library's tar writer; the modes
// and times come from the MapFS entries.
func layer(fsys fstest.MapFS) (v1.Layer, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.AddFS(fsys); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := b.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// PauseReference names the node's sandbox image, built here like Remedy's
// own (hack/pause), since no registry is reachable.
func PauseReference() string { return "remedy.local/pause:" + release.Version }

// DemoReference is Remedy's image under a second name, which the node
// imports alongside release.Image(): the demo workloads' set-image has an
// image to roll to (and back from) with no registry.
func DemoReference() string { return "remedy.local/demo-app:" + release.Version }

// LocalReferences are the images a node has without a pull: Pods may name
// only these.
func LocalReferences() []string { return []string{release.Image(), DemoReference(), PauseReference()} }

// BuildPause compiles hack/pause and writes its image, tagged
// PauseReference(), to path.
func BuildPause(ctx context.Context, repoRoot, arch, path string) error {
	bin := path + ".bin"
	defer os.Remove(bin)
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags=-s -w", "-o", bin, "./hack/pause")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build pause: %w: %s", err, b)
	}
	raw, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("read pause binary: %w", err)
	}
	l, err := layer(fstest.MapFS{"pause": {Data: raw, Mode: 0o555, ModTime: epoch}})
	if err != nil {
		return fmt.Errorf("build pause layer: %w", err)
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), l)
	if err != nil {
		return fmt.Errorf("append pause layer: %w", err)
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", arch, v1.Time{Time: epoch}
	cf.Config.User = User
	cf.Config.Entrypoint = []string{"/pause"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return fmt.Errorf("write pause config: %w", err)
	}
	tag, err := name.NewTag(PauseReference(), name.StrictValidation)
	if err != nil {
		return fmt.Errorf("parse %s: %w", PauseReference(), err)
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// BuildNodeImages builds Remedy's image and the pause image from repoRoot
// into dir as tarballs a node imports, and returns their paths.
func BuildNodeImages(ctx context.Context, repoRoot, arch, dir string) (remedy, pause string, err error) {
	rev, err := release.HeadRevision(ctx, repoRoot)
	if err != nil {
		rev = "unknown" // a tree without git still builds, unstamped
	}
	bin, err := BuildBinary(ctx, repoRoot, arch, rev, dir)
	if err != nil {
		return "", "", err
	}
	raw, err := os.ReadFile(bin)
	if err != nil {
		return "", "", fmt.Errorf("read binary: %w", err)
	}
	img, err := Build(raw, arch)
	if err != nil {
		return "", "", err
	}
	remedy, pause = filepath.Join(dir, "remedy-image.tar"), filepath.Join(dir, "pause-image.tar")
	if err := WriteNodeTarball(img, remedy); err != nil {
		return "", "", err
	}
	return remedy, pause, BuildPause(ctx, repoRoot, arch, pause)
}

// NodeOptions are a test node's options with Remedy's image and the pause
// image built from repoRoot into dir (Remedy's binary is dir/remedy).
func NodeOptions(ctx context.Context, repoRoot, arch, dir string) (*devenv.NodeOptions, error) {
	o, err := devenv.NodeOptionsFromEnv(repoRoot)
	if err != nil {
		return nil, err
	}
	remedy, pause, err := BuildNodeImages(ctx, repoRoot, arch, dir)
	if err != nil {
		return nil, err
	}
	o.Images, o.SandboxImage = []string{remedy, pause}, PauseReference()
	return &o, nil
}

// Command release writes a release of this tree into a directory (`make
// release`, into dist/): the image tarball, the install manifest rendered
// from deploy/ with the image pinned by digest, the CRDs alone, the
// kubectl-remedy plugin for each platform with its Krew manifest, and
// SHA256SUMS over all of them. test/release checks what it writes.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/yaml"

	"github.com/remedy-dev/remedy/internal/image"
	"github.com/remedy-dev/remedy/internal/install"
	"github.com/remedy-dev/remedy/internal/release"
)

// The files of a release.
const (
	ImageFile    = "remedy-image.tar"
	InstallFile  = "remedy-install.yaml"
	CRDsFile     = "remedy-crds.yaml"
	KrewFile     = "kubectl-remedy.yaml"
	ChecksumFile = "SHA256SUMS"
)

// Platforms of the kubectl plugin, GOOS/GOARCH.
var Platforms = []string{"linux/amd64", "linux/arm64", "darwin/arm64"}

// PluginArchive is the archive of the plugin for goos/goarch.
func PluginArchive(goos, goarch string) string {
	return fmt.Sprintf("kubectl-remedy_%s_%s.tar.gz", goos, goarch)
}

// downloads is where the release's files are published.
const downloads = "https://github.com/remedy-dev/remedy/releases/download/"

func main() {
	out := flag.String("o", "dist", "directory to write the release into (emptied first)")
	arch := flag.String("arch", "amd64", "GOARCH of the image")
	rev := flag.String("revision", "", "VCS revision to stamp (the Makefile's REVISION; default: git's HEAD)")
	flag.Parse()
	start := time.Now()
	if err := run(context.Background(), *out, *arch, *rev); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	fmt.Printf("release %s written to %s in %.0fs\n", release.Version, *out, time.Since(start).Seconds())
}

func run(ctx context.Context, out, arch, rev string) error {
	if rev == "" {
		var err error
		if rev, err = release.HeadRevision(ctx, "."); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(out); err != nil {
		return fmt.Errorf("empty %s: %w", out, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	tmp, err := os.MkdirTemp("", "remedy-release-")
	if err != nil {
		return fmt.Errorf("create temp dir: %w", err)
	}
	defer os.RemoveAll(tmp)

	digest, err := writeImage(ctx, out, tmp, arch, rev)
	if err != nil {
		return err
	}
	if err := writeManifests(out, digest); err != nil {
		return err
	}
	if err := writePlugins(ctx, out, tmp, rev); err != nil {
		return err
	}
	return writeChecksums(out)
}

// writeImage builds the image as `make image` does and returns its digest
// as read back from the tarball: the digest `crane push` gives it.
func writeImage(ctx context.Context, out, tmp, arch, rev string) (string, error) {
	bin, err := image.BuildBinary(ctx, ".", arch, rev, tmp)
	if err != nil {
		return "", err
	}
	raw, err := os.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("read binary: %w", err)
	}
	img, err := image.Build(raw, arch)
	if err != nil {
		return "", err
	}
	path := filepath.Join(out, ImageFile)
	if err := image.WriteTarball(img, path); err != nil {
		return "", err
	}
	loaded, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		return "", fmt.Errorf("read %s back: %w", path, err)
	}
	d, err := loaded.Digest()
	if err != nil {
		return "", fmt.Errorf("digest %s: %w", path, err)
	}
	fmt.Printf("%s@%s (linux/%s) -> %s\n", release.Image(), d, arch, path)
	return d.String(), nil
}

// PinnedImage is the image reference the install manifest uses.
func PinnedImage(digest string) string { return release.Image() + "@" + digest }

// writeManifests writes deploy/'s objects with every reference to the
// image (Deployments, --exec-image, the exec-image ConfigMap) pinned by
// digest, and the CRDs alone.
func writeManifests(out, digest string) error {
	crds, err := install.Render(".", install.CRDs)
	if err != nil {
		return err
	}
	all, err := install.All(".")
	if err != nil {
		return err
	}
	pinned := PinnedImage(digest)
	for i := range all {
		all[i] = replaceStrings(all[i], release.Image(), pinned).(install.Object)
	}
	for name, objs := range map[string][]install.Object{CRDsFile: crds, InstallFile: all} {
		raw, err := install.Encode(objs)
		if err != nil {
			return err
		}
		header := fmt.Sprintf("# Remedy %s: %s\n", release.Version, map[string]string{
			CRDsFile:    "the CustomResourceDefinitions (deploy/crd).",
			InstallFile: "deploy/'s install in README's order (CRDs, rbac, actions, policies, admission, manager, webhook),\n# the image pinned by digest. First create Secret remedy-system/remedy-webhook-client-ca (docs: install).",
		}[name])
		if err := os.WriteFile(filepath.Join(out, name), append([]byte(header), raw...), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// replaceStrings replaces old with new in every string of v.
func replaceStrings(v any, old, new string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = replaceStrings(e, old, new)
		}
	case []any:
		for i, e := range x {
			x[i] = replaceStrings(e, old, new)
		}
	case string:
		return strings.ReplaceAll(x, old, new)
	}
	return v
}

// writePlugins builds the plugin (cmd/kubectl-remedy, which builds for
// macOS too) for each platform, archives it as Krew installs it, and writes
// the Krew manifest.
func writePlugins(ctx context.Context, out, tmp, rev string) error {
	type platform struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		URI    string `json:"uri"`
		SHA256 string `json:"sha256"`
		Bin    string `json:"bin"`
	}
	var platforms []platform
	for _, p := range Platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		bin := filepath.Join(tmp, goos+"-"+goarch, "kubectl-remedy")
		if err := release.Build(ctx, ".", "./cmd/kubectl-remedy", goos, goarch, rev, bin); err != nil {
			return err
		}
		name := PluginArchive(goos, goarch)
		sum, err := writeArchive(filepath.Join(out, name), bin)
		if err != nil {
			return err
		}
		var pl platform
		pl.Selector.MatchLabels = map[string]string{"os": goos, "arch": goarch}
		pl.URI, pl.SHA256, pl.Bin = downloads+release.Version+"/"+name, sum, "kubectl-remedy"
		platforms = append(platforms, pl)
		fmt.Printf("kubectl-remedy %s -> %s\n", p, name)
	}
	manifest := map[string]any{
		"apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
		"kind":       "Plugin",
		"metadata":   map[string]any{"name": "remedy"},
		"spec": map[string]any{
			"version":          release.Version,
			"homepage":         "https://github.com/remedy-dev/remedy",
			"shortDescription": "Approve, reject, roll back and explain Remedy's runs",
			"description": "kubectl remedy acts on Remedy's KubernetesExecutions, RemediationRequests and\n" +
				"RemediationApprovalRequests with kubectl's own credentials: approve, reject,\n" +
				"rollback, status (a run's timeline) and why (what stopped it).\n",
			"platforms": platforms,
		},
	}
	raw, err := yaml.Marshal(manifest)
	if err != nil {
		return fmt.Errorf("encode the Krew manifest: %w", err)
	}
	return os.WriteFile(filepath.Join(out, KrewFile), raw, 0o644)
}

// writeArchive writes a gzipped tar holding bin as kubectl-remedy, with
// fixed times and owners so one binary gives one checksum, and returns its SHA-256.
func writeArchive(path, bin string) (string, error) {
	raw, err := os.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", bin, err)
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	hdr := &tar.Header{Name: "kubectl-remedy", Mode: 0o755, Size: int64(len(raw)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return "", err
	}
	if _, err := tw.Write(raw); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:]), nil
}

// writeChecksums writes SHA256SUMS in sha256sum's format over every file in out.
func writeChecksums(out string) error {
	entries, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("list %s: %w", out, err)
	}
	var lines []string
	for _, e := range entries {
		if e.IsDir() || e.Name() == ChecksumFile {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(out, e.Name()))
		if err != nil {
			return fmt.Errorf("read %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(raw)
		lines = append(lines, hex.EncodeToString(sum[:])+"  "+e.Name())
	}
	sort.Strings(lines)
	return os.WriteFile(filepath.Join(out, ChecksumFile), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// Command image builds Remedy's OCI image as a tarball (`make image`), with
// no Docker engine: load it with `docker load -i` or push it with `crane push`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/remedy-dev/remedy/internal/image"
	"github.com/remedy-dev/remedy/internal/release"
)

func main() {
	out := flag.String("o", "bin/remedy-image.tar", "tarball to write, tagged "+release.Image()+" and, for the node's demo workloads, "+image.DemoReference())
	pauseOut := flag.String("pause-o", "bin/pause-image.tar", "tarball of the node's pause image (hack/pause); empty skips it")
	arch := flag.String("arch", runtime.GOARCH, "GOARCH of the binary and the image")
	rev := flag.String("revision", "unknown", "VCS revision to stamp (the Makefile's REVISION)")
	flag.Parse()
	if err := run(*out, *pauseOut, *arch, *rev); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(out, pauseOut, arch, rev string) error {
	dir, err := os.MkdirTemp("", "remedy-image-")
	if err != nil {
		return fmt.Errorf("create temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	bin, err := image.BuildBinary(context.Background(), ".", arch, rev, dir)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("read binary: %w", err)
	}
	img, err := image.Build(raw, arch)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(out), err)
	}
	if err := image.WriteNodeTarball(img, out); err != nil {
		return err
	}
	if pauseOut != "" {
		if err := image.BuildPause(context.Background(), ".", arch, pauseOut); err != nil {
			return err
		}
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("digest image: %w", err)
	}
	st, err := os.Stat(out)
	if err != nil {
		return fmt.Errorf("stat %s: %w", out, err)
	}
	fmt.Printf("%s %s (%s, %.1f MiB) -> %s\n", release.Image(), digest, arch, float64(st.Size())/(1<<20), out)
	return nil
}

// Package release says which release this tree is: its version (the
// repository's VERSION file, embedded at build time), the VCS revision the
// binary was built from, and the image it ships as. `remedy version`,
// --version, remedy_build_info, the image's tag and label, `remedy dev`'s
// banner, deploy/ and the Helm chart all take it from here (tests keep
// deploy/ and the chart equal to it).
package release

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/remedy-dev/remedy"
)

// Repository is where the image is published.
const Repository = "ghcr.io/remedy-dev/remedy"

// Version is the VERSION file's, such as v0.1.0.
var Version = strings.TrimSpace(remedy.VERSION)

// Revision is the commit the binary was built from, with "-dirty" when the
// tree had uncommitted changes: what the Makefile stamps (RevisionFlag), or
// else what the go command recorded, or "unknown" (go build -buildvcs=false,
// as GOFLAGS may say, or a tree without .git).
var Revision = revision()

// stamped is set by -ldflags -X (RevisionFlag).
var stamped string

// RevisionFlag is the -ldflags argument that stamps rev as Revision.
func RevisionFlag(rev string) string {
	return "-X github.com/remedy-dev/remedy/internal/release.stamped=" + rev
}

// Image is the pinned reference, never :latest.
func Image() string { return Repository + ":" + Version }

// String is the one line `remedy version` prints.
func String() string {
	return fmt.Sprintf("remedy %s (revision %s, %s, %s/%s)", Version, Revision, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func revision() string {
	if stamped != "" {
		return stamped
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "unknown", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && rev != "unknown" {
		rev += "-dirty"
	}
	return rev
}

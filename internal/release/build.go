package release

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// Build compiles the command pkg (./cmd/remedy, ./cmd/kubectl-remedy) of
// the tree at repoRoot as released binaries are: static (no cgo), stripped,
// for goos/goarch, with rev stamped as its Revision, into out.
func Build(ctx context.Context, repoRoot, pkg, goos, goarch, rev, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags=-s -w "+RevisionFlag(rev), "-o", out, pkg)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s for %s/%s: %w: %s", pkg, goos, goarch, err, b)
	}
	return nil
}

// HeadRevision is the commit checked out at repoRoot, with "-dirty" when
// its tree has uncommitted changes (the Makefile's REVISION says the same).
func HeadRevision(ctx context.Context, repoRoot string) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "-C", repoRoot, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", fmt.Errorf("read HEAD's commit: %w", err)
	}
	rev := string(out[:len(out)-1])
	if err := exec.CommandContext(ctx, "git", "-C", repoRoot, "diff", "--quiet", "HEAD").Run(); err != nil {
		rev += "-dirty"
	}
	return rev, nil
}

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/remedy-dev/remedy/internal/plugin"
)

// runKubectl is `kubectl remedy` (this binary run as kubectl-remedy) and
// `remedy kubectl`.
func runKubectl(ctx context.Context, args []string) error {
	return plugin.Run(ctx, args, os.Stdout, os.Stderr)
}

// isKubectlPlugin reports whether kubectl started this binary as its plugin.
func isKubectlPlugin(argv0 string) bool { return filepath.Base(argv0) == plugin.Name }

// linkKubectlPlugin makes dir/kubectl-remedy a symlink to this binary, so
// that dir on PATH gives `kubectl remedy`; remove deletes it again.
func linkKubectlPlugin(dir string) (path string, remove func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("find this binary: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("create %s: %w", dir, err)
	}
	path = filepath.Join(dir, plugin.Name)
	_ = os.Remove(path)
	if err := os.Symlink(self, path); err != nil {
		return "", nil, fmt.Errorf("link %s: %w", path, err)
	}
	return path, func() { _ = os.Remove(path); _ = os.Remove(dir) }, nil
}

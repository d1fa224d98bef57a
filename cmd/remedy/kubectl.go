package main

import (
	"context"
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

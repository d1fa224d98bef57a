package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/remedy-dev/remedy/internal/plugin"
)

// linkTools makes dir/<name> a symlink to each target (the pinned kubectl
// and temporal), so that dir first on PATH gives the versions Remedy is
// tested with; remove deletes the links.
func linkTools(dir string, targets map[string]string) (remove func(), err error) {
	var made []string
	remove = func() {
		for _, p := range made {
			_ = os.Remove(p)
		}
	}
	for name, target := range targets {
		path := filepath.Join(dir, name)
		_ = os.Remove(path)
		if err := os.Symlink(target, path); err != nil {
			remove()
			return nil, fmt.Errorf("link %s: %w", path, err)
		}
		made = append(made, path)
	}
	return remove, nil
}

// linkKubectlPlugin makes dir/kubectl-remedy a symlink to this binary, so
// that dir on PATH gives `kubectl remedy` (main runs the plugin when started
// by that name); remove deletes it again.
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

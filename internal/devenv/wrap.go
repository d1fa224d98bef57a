package devenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// wrapper links binaries to the running executable so that they die with
// this process (see ExecIfWrapped). Register every binary before starting
// anything: the links work through this process's environment.
type wrapper struct{ dir string }

// wrap returns the path to start instead of target.
func (w wrapper) wrap(target string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find own executable: %w", err)
	}
	link := filepath.Join(w.dir, filepath.Base(target))
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", w.dir, err)
	}
	if err := os.Symlink(self, link); err != nil {
		return "", fmt.Errorf("link %s: %w", link, err)
	}
	if err := os.Setenv(wrapTargetEnv+wrapKey(link), target); err != nil {
		return "", fmt.Errorf("set wrapper environment: %w", err)
	}
	if err := os.Setenv(wrapParentEnv, strconv.Itoa(os.Getpid())); err != nil {
		return "", fmt.Errorf("set wrapper environment: %w", err)
	}
	return link, nil
}

// wrapKey names a wrapped binary in the environment: kube-apiserver is KUBE_APISERVER.
func wrapKey(path string) string {
	return strings.ToUpper(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, filepath.Base(path)))
}

// wrappedEnv is this process's environment without the wrapper's variables,
// so the real binary and its children never act as wrappers.
func wrappedEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, wrapTargetEnv) && !strings.HasPrefix(kv, wrapParentEnv+"=") {
			env = append(env, kv)
		}
	}
	return env
}

package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// devLock is the exclusive hold of one remedy-dev on its .dev directory.
// The kernel drops an flock when its holder dies, even by SIGKILL, so a
// crashed instance never leaves a stale lock.
type devLock struct{ f *os.File }

// claimDevDir creates dir, takes its lock and points TMPDIR at dir/tmp, so
// that every temporary file (etcd's data, certificates, Temporal's
// database) is below dir and the next start clears what a killed one left.
// release removes dir/tmp and drops the lock.
func claimDevDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	lock, err := lockDevDir(dir)
	if err != nil {
		return nil, err
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.RemoveAll(tmp); err != nil {
		lock.release()
		return nil, fmt.Errorf("clear %s: %w", tmp, err)
	}
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		lock.release()
		return nil, fmt.Errorf("create %s: %w", tmp, err)
	}
	if err := os.Setenv("TMPDIR", tmp); err != nil {
		lock.release()
		return nil, fmt.Errorf("set TMPDIR: %w", err)
	}
	return func() { _ = os.RemoveAll(tmp); lock.release() }, nil
}

// lockDevDir takes dir's lock without waiting, and refuses with the
// holder's pid if another instance has it. It writes nothing until it holds
// the lock, so a refused instance leaves dir as it found it.
func lockDevDir(dir string) (*devLock, error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another remedy-dev (pid %s) is running with %s: stop it (Ctrl-C in its terminal) first, or use its .dev/env",
				strings.TrimSpace(string(holder)), dir)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &devLock{f: f}, nil
}

// release drops the lock; the file stays, so that a later instance locks
// the same inode as one starting at this moment.
func (l *devLock) release() { _ = l.f.Close() }

// checkPortsFree refuses when something already listens on one of the
// addresses a fixed-port part binds, naming the part and the flag that moves it.
func checkPortsFree(ports []fixedPort) error {
	for _, p := range ports {
		l, err := net.Listen("tcp", p.addr)
		if err != nil {
			return fmt.Errorf("%s address %s is in use (another remedy-dev or Temporal server?): free it or choose another with --%s: %w",
				p.part, p.addr, p.flag, err)
		}
		_ = l.Close()
	}
	return nil
}

type fixedPort struct{ part, addr, flag string }

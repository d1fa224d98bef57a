//go:build !linux

package devenv

import "syscall"

// ExecIfWrapped returns at once: only Linux has a parent-death signal, so
// DieWithParent wraps nothing elsewhere.
func ExecIfWrapped() {}

func childSysProcAttr() *syscall.SysProcAttr { return nil }

const canWrap = false

//go:build !linux

package devenv

import (
	"context"
	"errors"
	"io"
)

type node struct{}

func prepareNode(context.Context, *Env, NodeOptions, io.Writer) (*node, error) {
	return nil, errors.New("a node runs on Linux only: start without one (make dev NODE=0)")
}

func (*node) startKubelet(context.Context, *Env, string) error { return nil }
func (*node) stop() error                                      { return nil }

func (e *Env) kubeletServingCA() string { return "" }

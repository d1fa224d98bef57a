package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/remedy-dev/remedy/internal/devenv"
)

// session is one run of remedy-dev: its flags, what it started, and what
// to undo on the way out, last first.
type session struct {
	f        *devFlags
	opts     devenv.Options
	stateDir string
	log      *os.File
	devLog   *slog.Logger
	metrics  *devMetrics
	env      *devenv.Env
	undo     []func()
}

func (s *session) onExit(f func()) { s.undo = append(s.undo, f) }

func (s *session) close() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
}

// step prints that msg starts and returns the function that prints it done.
func step(msg string) func() {
	start := time.Now()
	fmt.Printf("remedy-dev: %s ...\n", msg)
	return func() { fmt.Printf("remedy-dev: %s done (%.1fs)\n", msg, time.Since(start).Seconds()) }
}

func runDev(ctx context.Context, args []string) error {
	f, err := parseDevFlags(args)
	if err != nil {
		return err
	}
	s := &session{f: f}
	defer s.close()
	if s.opts, err = devenv.OptionsFromEnv(f.root); err != nil {
		return err
	}
	if err := s.claim(); err != nil {
		return err
	}
	if err := s.openLog(); err != nil {
		return err
	}
	if err := s.startPlatform(ctx); err != nil {
		return err
	}
	webhookStopped, err := s.installAndStartDrift(ctx)
	if err != nil {
		return err
	}
	a, err := s.startAlertsAndAccess(ctx)
	if err != nil {
		return err
	}
	stopped, err := s.startRemedy(ctx, a)
	if err != nil {
		return err
	}
	s.printReady(a)
	select {
	case <-ctx.Done():
		fmt.Println("remedy-dev: stopping")
		start := time.Now()
		<-stopped
		<-webhookStopped
		// Both: the terminal is where the person who pressed Ctrl-C looks.
		took := time.Since(start).Seconds()
		fmt.Printf("remedy-dev: stopped the operator, the worker and the drift webhook in %.1fs\n", took)
		s.devLog.Info("stopped the operator, the worker and the drift webhook", "seconds", took)
		return nil
	case err := <-stopped:
		if err == nil {
			err = errors.New("operator and worker stopped unexpectedly")
		}
		return err
	case err := <-webhookStopped:
		if err == nil {
			err = errors.New("drift webhook stopped unexpectedly")
		}
		return err
	}
}

// claim takes the dev directory and the state directory, and checks that
// every fixed port is free. Nothing in the dev directory is written before
// it is claimed, and nothing is started before every fixed port is known free.
func (s *session) claim() error {
	release, err := claimDevDir(s.f.devDir)
	if err != nil {
		return err
	}
	s.onExit(release)
	if s.stateDir = s.f.stateDir; s.stateDir != "" {
		if s.stateDir, err = filepath.Abs(s.stateDir); err != nil {
			return fmt.Errorf("resolve --state-dir: %w", err)
		}
		if err := os.MkdirAll(s.stateDir, 0o700); err != nil {
			return fmt.Errorf("create --state-dir: %w", err)
		}
		// Two instances on one etcd data directory or Temporal database would corrupt both.
		lock, err := lockDevDir(s.stateDir)
		if err != nil {
			return err
		}
		s.onExit(lock.release)
	}
	fixed := []fixedPort{
		{"Temporal frontend", "127.0.0.1:" + s.f.temporalPort, "temporal-port"},
		{"Temporal Web UI", "127.0.0.1:" + s.f.uiPort, "ui-port"},
		{"codec server", s.f.codecAddr, "codec-addr"},
	}
	if s.f.promAddr != "0" {
		fixed = append(fixed, fixedPort{"Prometheus", s.f.promAddr, "prometheus-addr"}, fixedPort{"kube-state-metrics", s.f.ksmAddr, "kube-state-metrics-addr"})
	}
	if err := checkPortsFree(fixed); err != nil {
		return err
	}
	if s.metrics, err = serveDevMetrics([]fixedPort{
		{"operator metrics", s.f.operatorMetrics, "operator-metrics-addr"},
		{"drift webhook metrics", s.f.webhookMetrics, "webhook-metrics-addr"},
		{"worker metrics", s.f.workerMetrics, "worker-metrics-addr"},
	}); err != nil {
		return err
	}
	s.onExit(s.metrics.stop)
	return nil
}

// openLog creates <dev-dir>/dev.log. Every part writes JSON lines to it: the
// operator, worker and webhook through zap, the rest through slog, and
// net/http's refused TLS clients (the webhooks' own readiness dials) through
// the standard logger, which slog.SetDefault routes to slog's handler.
func (s *session) openLog() error {
	logFile, err := os.Create(filepath.Join(s.f.devDir, "dev.log"))
	if err != nil {
		return fmt.Errorf("create log file: %w", err)
	}
	s.log = logFile
	s.onExit(func() { _ = logFile.Close() })
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))
	s.devLog = slog.New(slog.NewJSONHandler(logFile, nil)).With("logger", "remedy-dev")
	slog.SetDefault(s.devLog)
	return nil
}

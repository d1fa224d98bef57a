package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/remedy-dev/remedy/internal/compose"
	"github.com/remedy-dev/remedy/internal/devcompose"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/image"
	remedymetrics "github.com/remedy-dev/remedy/internal/metrics"
)

// startPlatform starts etcd, kube-apiserver, kube-controller-manager, the
// Temporal dev server (and with --node a node), then installs Remedy's
// CRDs, RBAC and ServiceAccounts into them.
func (s *session) startPlatform(ctx context.Context) error {
	parts, err := s.platformOptions()
	if err != nil {
		return err
	}
	done := step("starting " + parts)
	if s.env, err = devenv.Start(ctx, s.opts); err != nil {
		return err
	}
	s.onExit(s.stopPlatform)
	done()
	done = step("installing CRDs, RBAC, the example roles of deploy/rbac/*-example.yaml and per-action ServiceAccounts into namespace " + devenv.Namespace)
	if err := s.env.InstallRemedy(ctx, s.f.root); err != nil {
		return err
	}
	done()
	return nil
}

// platformOptions completes devenv's options from the flags and says what
// they start.
func (s *session) platformOptions() (parts string, err error) {
	o := &s.opts
	o.ControllerManager = true
	o.TemporalHostPort = "127.0.0.1:" + s.f.temporalPort
	o.TemporalUIPort = s.f.uiPort
	o.TemporalUICodecEndpoint = s.codecURL()
	o.Log = s.log
	o.DieWithParent = true
	o.StateDir = s.stateDir
	o.TemporalMetrics = remedymetrics.NewTemporalHandler(ctrlmetrics.Registry)
	parts = "etcd, kube-apiserver, kube-controller-manager and the Temporal dev server"
	if !s.f.runNode {
		return parts, nil
	}
	node, err := devenv.NodeOptionsFromEnv(s.f.root)
	if err != nil {
		return "", err
	}
	for _, img := range strings.Split(s.f.nodeImages, ",") {
		if !filepath.IsAbs(img) {
			img = filepath.Join(s.f.root, img)
		}
		node.Images = append(node.Images, img)
	}
	node.SandboxImage = image.PauseReference()
	o.Node = &node
	return parts + ", and a node (containerd, kube-scheduler, kubelet)", nil
}

// stopPlatform removes what the session wrote into the dev directory and
// stops what startPlatform started.
func (s *session) stopPlatform() {
	for _, name := range []string{"kubeconfig", "env", alertsTokenFile, alertmanagerHTTPConfig} {
		_ = os.Remove(filepath.Join(s.f.devDir, name))
	}
	start := time.Now()
	if err := s.env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "remedy-dev: stop:", err)
		return
	}
	took := time.Since(start).Seconds()
	fmt.Printf("remedy-dev: stopped the API server, Temporal and the rest of the platform in %.1fs\n", took)
	s.devLog.Info("stopped the API server, Temporal and the rest of the platform", "seconds", took)
}

// installAndStartDrift starts the drift webhook, then (unless resuming)
// installs the default policy and the demo workloads: the webhook comes
// first, so they get traces.
func (s *session) installAndStartDrift(ctx context.Context) (stopped <-chan error, err error) {
	done := step("starting the drift webhook (mode " + string(s.f.mode) + ") and installing its configuration")
	stopped, err = devcompose.RunDriftWebhook(ctx, s.env, devcompose.DriftWebhookOptions{
		Manifest: filepath.Join(s.f.root, "deploy", "webhook", "drift.yaml"), DefaultMode: s.f.mode,
	})
	if err != nil {
		return nil, err
	}
	done()
	if s.env.Resumed {
		// Applying them again would undo what the last session changed, such as a scale.
		fmt.Printf("remedy-dev: resuming from %s: the default policy and demo workloads stay as the last session left them\n", s.stateDir)
		return stopped, nil
	}
	done = step("installing the default policy and the demo workloads")
	if err := devenv.Install(ctx, s.env.Config, filepath.Join(s.f.root, "deploy", "policies"), filepath.Join(s.f.root, "deploy", "samples", "demo")); err != nil {
		return nil, err
	}
	done()
	return stopped, nil
}

// startRemedy starts the operator and the worker, then (unless resuming)
// installs the sample RemediationRule as the person at the keyboard.
func (s *session) startRemedy(ctx context.Context, a *access) (stopped <-chan error, err error) {
	done := step("starting the operator and the worker")
	stopped, err = devcompose.RunRemedy(ctx, s.env, devcompose.RemedyOptions{WorkerStopTimeout: s.f.workerStop,
		DriftCallbackURLs: *s.f.callbacks, DriftApproval: s.f.driftApproval, AlertmanagerURL: a.am.URL,
		AlertmanagerHTTPConfigFile: a.am.HTTPConfig,
		Codec:                      &compose.CodecOptions{Addr: s.f.codecAddr, AllowedOrigins: []string{s.webUI(), "http://localhost:" + s.f.uiPort}}})
	if err != nil {
		return nil, err
	}
	done()
	if s.env.Resumed {
		return stopped, nil
	}
	// The operator's admission webhook stamps the rule's author: it must be
	// serving. The author is the person at the keyboard, as if they had
	// applied it, so their own `kubectl apply` of it changes nothing.
	done = step("installing the sample RemediationRule demo/demo-latency")
	if err := installWhenAdmitted(ctx, a.person, filepath.Join(s.f.root, "deploy", "samples", "rrule-demo-latency.yaml")); err != nil {
		return nil, err
	}
	done()
	return stopped, nil
}

func (s *session) codecURL() string { return "http://" + s.f.codecAddr }
func (s *session) webUI() string    { return "http://127.0.0.1:" + s.f.uiPort }

// Package node tests the real node devenv runs: Pods from the locally built
// images, no registry, no packet off the machine.
package node

import (
	"os"
	"testing"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/internal/devcompose"
	"github.com/remedy-dev/remedy/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, harness.Options{Node: true, Remedy: true,
		// Finished Jobs are collected after their TTL (TestJobCollectedPastItsTTLIsNotRunAgain).
		ExtraControllers: []string{"ttl-after-finished-controller"},
		// Real ReplicaSet, Pod and kubelet writes pass the drift webhook (TestDriftTraceFollowsARealRollout);
		// tests that enforce set kausality.io/mode on their namespace.
		Drift: &devcompose.DriftWebhookOptions{DefaultMode: kv1.ModeLog},
	}))
}

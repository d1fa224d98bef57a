// Package node tests the real node devenv runs: Pods from the locally built
// images, no registry, no packet off the machine.
package node

import (
	"os"
	"testing"

	"github.com/remedy-dev/remedy/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, harness.Options{Node: true, Remedy: true,
		// Finished Jobs are collected after their TTL (TestJobCollectedPastItsTTLIsNotRunAgain).
		ExtraControllers: []string{"ttl-after-finished-controller"}}))
}

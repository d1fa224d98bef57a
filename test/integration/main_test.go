package integration

import (
	"os"
	"testing"

	"github.com/remedy-dev/remedy/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, harness.Options{ControllerManager: true, Remedy: true}))
}

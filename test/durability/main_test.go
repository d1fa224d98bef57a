// Package durability runs without the package-wide operator and worker, so its
// tests can take them down and bring them back, as a crash or an upgrade would.
package durability

import (
	"os"
	"testing"

	"github.com/remedy-dev/remedy/test/harness"
)

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, harness.Options{}))
}

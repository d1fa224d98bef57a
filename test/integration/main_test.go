package integration

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/remedy-dev/remedy/test/harness"
)

// lostCheckInterval lets tests see a lost workflow within seconds; the
// operator's default (2m) would make them wait minutes.
const lostCheckInterval = 3 * time.Second

func TestMain(m *testing.M) {
	flag.Parse()
	o := harness.Options{ControllerManager: true, Remedy: true}
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		// Benchmarks measure the operator as shipped, with its default interval.
		o.WorkflowCheckInterval = lostCheckInterval
	}
	os.Exit(harness.Main(m, o))
}

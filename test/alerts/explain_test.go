package alerts

import (
	"context"
	"testing"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// explain logs what the alert's run says it is doing, for a failing test.
func explain(t *testing.T, ns, rule, fp string) {
	t.Helper()
	id := v1alpha1.AlertWorkflowID(ns, rule, fp)
	v, err := harness.Temporal().QueryWorkflow(context.Background(), id, "", workflows.QueryStatus)
	if err != nil {
		t.Logf("query %s: %v", id, err)
		return
	}
	var r workflows.AlertResult
	_ = v.Get(&r)
	t.Logf("run %s: %+v", id, r)
}

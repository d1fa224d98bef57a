package deploy

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/remedy-dev/remedy/test/procs"
	"github.com/remedy-dev/remedy/workflows"
)

// TestReadmeTemporalNamespace: the install doc's commands give Temporal the
// namespace and the search attributes Remedy's workflows set.
func TestReadmeTemporalNamespace(t *testing.T) {
	blocks, err := procs.ParseReadme()
	require.NoError(t, err)
	require.NoError(t, procs.RunReadme(blocks.Temporal, t.TempDir()))
	env := procs.Env()
	ctx := context.Background()
	ns, err := env.Temporal.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "remedy"})
	require.NoError(t, err)
	assert.Equal(t, "remedy", ns.GetNamespaceInfo().GetName())
	attrs, err := env.Temporal.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "remedy"})
	require.NoError(t, err)
	for _, name := range workflows.SearchAttributeNames {
		assert.Contains(t, attrs.GetCustomAttributes(), name)
	}
}

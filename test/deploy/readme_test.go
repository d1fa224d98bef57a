package deploy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/remedy-dev/remedy/test/docs"
	"github.com/remedy-dev/remedy/workflows"
)

// readmeBlocks are the blocks of README's "Running against a real cluster"
// marked `doctest: deploy`, in order: the install, the Temporal namespace,
// the secured Temporal's Secrets and the scaling.
type readmeBlocks struct{ install, temporal, tls, scale docs.Block }

func parseReadme() (readmeBlocks, error) {
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		return readmeBlocks{}, fmt.Errorf("read README.md: %w", err)
	}
	all, err := docs.Parse("README.md", string(raw))
	if err != nil {
		return readmeBlocks{}, err
	}
	var deploy []docs.Block
	for _, b := range all {
		if b.Mode == docs.Deploy {
			deploy = append(deploy, b)
		}
	}
	want := []string{"kubectl apply -k deploy/manager", "temporal operator namespace create", "secret generic remedy-temporal-tls", "scale deploy/remedy-worker"}
	if len(deploy) != len(want) {
		return readmeBlocks{}, fmt.Errorf("README.md has %d `doctest: deploy` blocks, this test runs %d", len(deploy), len(want))
	}
	for i, w := range want {
		if !strings.Contains(deploy[i].Script, w) {
			return readmeBlocks{}, fmt.Errorf("%s: deploy block %d should contain %q", deploy[i], i+1, w)
		}
	}
	return readmeBlocks{deploy[0], deploy[1], deploy[2], deploy[3]}, nil
}

// runReadme runs b as a person would from a checkout, in dir (which holds
// deploy/ and whatever files the block reads), with the pinned kubectl and
// temporal on PATH pointed at this package's parts.
func runReadme(b docs.Block, dir string) error {
	for _, name := range []string{"deploy", "temporal-dev.yaml"} {
		if err := os.Symlink(filepath.Join(root, name), filepath.Join(dir, name)); err != nil && !os.IsExist(err) {
			return fmt.Errorf("link %s: %w", name, err)
		}
	}
	cmd := exec.Command("bash", "--noprofile", "--norc", "-euo", "pipefail", "-c", b.Script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"PATH="+os.Getenv("KUBEBUILDER_ASSETS")+":"+filepath.Dir(os.Getenv("TEMPORAL_CLI"))+":"+os.Getenv("PATH"),
		"KUBECONFIG="+adminKubeconfig, "TEMPORAL_ADDRESS="+env.TemporalAddress)
	out, err := cmd.CombinedOutput()
	fmt.Fprintf(logFile, "deploy: ran %s:\n%s%s\n", b, b.Script, out)
	if err != nil {
		return fmt.Errorf("%s: %w:\n%s", b, err, out)
	}
	return nil
}

// TestReadmeTemporalNamespace: README's commands give Temporal the
// namespace and the search attributes Remedy's workflows set.
func TestReadmeTemporalNamespace(t *testing.T) {
	blocks, err := parseReadme()
	require.NoError(t, err)
	require.NoError(t, runReadme(blocks.temporal, t.TempDir()))
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

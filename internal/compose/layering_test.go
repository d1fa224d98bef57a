package compose

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/remedy-dev/remedy/"

// TestLayering keeps the import graph pointing one way: the composer
// (cmd/remedy, cmd/remedy-dev, this package and internal/devcompose) is
// the only place the parts meet; the processes that only start or signal
// runs (the operator, its admission, the drift webhook, the receiver) import
// no activity package; what every process shares (the leaves) imports no
// process; and the product binary links no developer environment.
func TestLayering(t *testing.T) {
	root := filepath.Join("..", "..")
	graph := importGraph(t, root)
	processes := []string{"operator", "webhook", "worker", "alerts", "activities", "workflows", "cmd", "internal/compose", "internal/devcompose", "internal/devenv"}
	leaves := []string{"api/v1alpha1", "api/kausality/v1alpha1", "internal/actions", "internal/alertmanager", "internal/alertrule",
		"internal/authz", "internal/metrics", "internal/policy", "internal/reloadrule", "internal/runs", "internal/seal", "internal/webhookauth"}
	rules := []struct{ from, must string }{
		{"operator", "webhook"},
		{"operator", "worker"},
		{"operator/admission", "activities"},
		{"operator/admission", "workflows"},
		{"webhook", "operator"},
		{"worker", "operator"},
		{"worker", "webhook"},
		{"workflows", "operator"},
		{"internal/devenv", "operator"},
		{"internal/devenv", "webhook"},
		{"internal/devenv", "worker"},
		{"internal/devenv", "internal/compose"},
		{"internal/devenv", "internal/devcompose"},
		// The product binary's composer links no envtest or Temporal dev server.
		{"internal/compose", "internal/devenv"},
		{"cmd/remedy", "internal/devenv"},
	}
	for _, leaf := range leaves {
		for _, p := range processes {
			rules = append(rules, struct{ from, must string }{leaf, p})
		}
	}
	for _, tc := range rules {
		reach := reachable(graph, tc.from)
		require.DirExists(t, filepath.Join(root, tc.from))
		for p := range reach {
			assert.False(t, within(p, tc.must), "%s imports %s (through the graph)", tc.from, p)
		}
	}
	activityLayers(t, graph)
	for _, from := range []string{"operator", "operator/admission", "webhook", "alerts"} {
		require.NotEmpty(t, graph[from], "%s has imports", from)
		for _, p := range graph[from] {
			assert.False(t, within(p, "activities"), "%s imports the activity package %s: take the contract from api/ or a leaf", from, p)
		}
	}
}

// activityLayers keeps the activity packages apart: each domain imports the
// gate and the fail leaf (alerts also status, for its rule's Events), never
// another domain; the gate and fail import no domain; the shared test fakes
// are imported by tests only.
func activityLayers(t *testing.T, graph map[string][]string) {
	domains := []string{"activities/execution", "activities/reload", "activities/drift", "activities/alerts", "activities/approval", "activities/status"}
	allowed := map[string][]string{"activities/alerts": {"activities/status"}}
	for _, from := range append([]string{"activities/gate", "activities/fail"}, domains...) {
		require.NotEmpty(t, graph[from], "%s has imports", from)
		for p := range reachable(graph, from) {
			for _, d := range domains {
				if d != from && within(p, d) && !slices.Contains(allowed[from], d) {
					t.Errorf("%s imports the activity domain %s (through the graph): share through activities/gate or activities/fail", from, p)
				}
			}
		}
	}
	for from, imports := range graph {
		for _, p := range imports {
			assert.False(t, within(p, "activities/internal/activitytest"), "%s imports the test fakes: only tests may", from)
		}
	}
}

func within(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// importGraph maps each package directory under root (relative, slash
// separated) to the module packages its non-test files import.
func importGraph(t *testing.T, root string) map[string][]string {
	graph := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, module) {
				graph[filepath.ToSlash(rel)] = append(graph[filepath.ToSlash(rel)], strings.TrimPrefix(p, module))
			}
		}
		return nil
	})
	require.NoError(t, err)
	return graph
}

func reachable(graph map[string][]string, from string) map[string]bool {
	seen := map[string]bool{}
	stack := append([]string(nil), graph[from]...)
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !seen[p] {
			seen[p] = true
			stack = append(stack, graph[p]...)
		}
	}
	return seen
}

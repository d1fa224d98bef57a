package gate

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

// Remedy's product code builds a client that acts as another identity in
// exactly one place, the write gate; tests and the test harness may
// impersonate users to play them. A new impersonating client anywhere else
// would be a write path around the gate, and fails this test.
func TestOnlyTheGateImpersonates(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	var found []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "test" || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == "hack" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if n.Sel.Name == "ImpersonationConfig" || n.Sel.Name == "Impersonate" {
					found = append(found, rel)
				}
				// Gate.WithFake swaps every client the gate hands out: tests only.
				if n.Sel.Name == "WithFake" {
					t.Errorf("%s calls Gate.WithFake, which only tests may", rel)
				}
			case *ast.KeyValueExpr:
				if id, ok := n.Key.(*ast.Ident); ok && id.Name == "Impersonate" {
					found = append(found, rel)
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	for _, f := range found {
		assert.Equal(t, filepath.Join("activities", "gate", "gate.go"), f, "only the write gate may build an impersonating client")
	}
	assert.NotEmpty(t, found, "the gate itself impersonates: the scan must see it")
}

func TestInspectorClientsCannotWrite(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.RawQuery)
	}))
	defer srv.Close()
	rt := readOnly{http.DefaultTransport}
	for _, tc := range []struct {
		method, query string
		allowed       bool
	}{
		{http.MethodGet, "", true},
		{http.MethodPatch, "dryRun=All&fieldManager=remedy", true},
		{http.MethodDelete, "dryRun=All", true},
		{http.MethodPatch, "fieldManager=remedy", false},
		{http.MethodPut, "", false},
		{http.MethodPost, "", false},
		{http.MethodDelete, "", false},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+"/apis/apps/v1/namespaces/a/deployments/web?"+tc.query, nil)
		require.NoError(t, err)
		resp, err := rt.RoundTrip(req)
		if tc.allowed {
			require.NoError(t, err, tc.method+" "+tc.query)
			resp.Body.Close()
		} else {
			require.Error(t, err, tc.method+" "+tc.query)
			assert.Contains(t, err.Error(), "write gate")
		}
	}
	assert.Equal(t, []string{"GET ", "PATCH dryRun=All&fieldManager=remedy", "DELETE dryRun=All"}, got)
}

func TestGateWritesOnlyTheActionOrItsCapturedRollback(t *testing.T) {
	spec := &v1alpha1.KubernetesExecutionSpec{Action: "scale", Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](5)}}
	k := &v1alpha1.KubernetesExecution{Status: v1alpha1.KubernetesExecutionStatus{RollbackInformation: &v1alpha1.RollbackInformation{
		Available: true, RollbackAction: "scale", RollbackParameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](3)},
	}}}
	scale := func(n int32) actions.Request {
		return actions.Request{Action: "scale", Params: v1alpha1.ActionParameters{Replicas: ptr.To(n)}}
	}
	for _, tc := range []struct {
		name           string
		req            actions.Request
		action, rollbk bool
	}{
		{"the action as asked", scale(5), true, false},
		{"the captured rollback", scale(3), false, true},
		{"other parameters", scale(50), false, false},
		{"another action", actions.Request{Action: "set-image", Params: v1alpha1.ActionParameters{Image: "evil:1", Container: "web"}}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.action, isActionOf(spec, tc.req))
			assert.Equal(t, tc.rollbk, isRollbackOf(k, tc.req, nil))
		})
	}
	unavailable := k.DeepCopy()
	unavailable.Status.RollbackInformation.Available = false
	assert.False(t, isRollbackOf(unavailable, scale(3), nil), "no rollback where none was captured")
	assert.False(t, isRollbackOf(&v1alpha1.KubernetesExecution{}, scale(3), nil))
}

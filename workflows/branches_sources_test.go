package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"
)

// sources are the parsed non-test Go files of some packages; dirs[0] is this one.
type sources struct {
	files map[string][]*ast.File
	dirs  []string
}

func parseSources(t *testing.T, dirs ...string) sources {
	t.Helper()
	s := sources{files: map[string][]*ast.File{}, dirs: dirs}
	fset := token.NewFileSet()
	for _, d := range dirs {
		names, err := filepath.Glob(filepath.Join(d, "*.go"))
		require.NoError(t, err)
		for _, n := range names {
			if strings.HasSuffix(n, "_test.go") || strings.HasSuffix(n, "zz_generated.deepcopy.go") {
				continue
			}
			f, err := parser.ParseFile(fset, n, nil, 0)
			require.NoError(t, err)
			s.files[d] = append(s.files[d], f)
		}
		require.NotEmpty(t, s.files[d], "no Go files in %s", d)
	}
	return s
}

// consts lists the string constants declared with a literal value in dir:
// name → value, and the type name each was declared with ("" untyped).
func (s sources) consts(dir string) (values, types map[string]string) {
	values, types = map[string]string{}, map[string]string{}
	for _, f := range s.files[dir] {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					values[n.Name] = v
					if id, ok := vs.Type.(*ast.Ident); ok {
						types[n.Name] = id.Name
					}
				}
			}
		}
	}
	return values, types
}

// reasons are the values of the Reason* constants (api/v1alpha1/reasons.go)
// that the workflows and activities use: the reasons a run can end with.
func (s sources) reasons() map[string]bool {
	values, _ := s.consts("../api/v1alpha1")
	out := map[string]bool{}
	for _, d := range s.dirs {
		for _, f := range s.files[d] {
			ast.Inspect(f, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Reason") {
					if v, ok := values[sel.Sel.Name]; ok {
						out[v] = true
					}
				}
				return true
			})
		}
	}
	return out
}

// phases are the values of every constant of type Phase in api/v1alpha1.
func (s sources) phases() map[string]bool {
	out := map[string]bool{}
	values, types := s.consts("../api/v1alpha1")
	for n, v := range values {
		if types[n] == "Phase" {
			out[v] = true
		}
	}
	return out
}

// calls returns the second argument of each call of workflow.<fn> in this package.
func (s sources) calls(fn string) []ast.Expr {
	var out []ast.Expr
	for _, f := range s.files[s.dirs[0]] {
		ast.Inspect(f, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := c.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != fn || len(c.Args) < 2 {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "workflow" {
				out = append(out, c.Args[1])
			}
			return true
		})
	}
	return out
}

// continueAsNew names the workflows every workflow.NewContinueAsNewError continues as.
func (s sources) continueAsNew(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, arg := range s.calls("NewContinueAsNewError") {
		id, ok := arg.(*ast.Ident)
		require.True(t, ok, "workflow.NewContinueAsNewError with a workflow this test cannot name: %T", arg)
		out[id.Name] = true
	}
	return out
}

type nameRegistry []string

func (r *nameRegistry) RegisterWorkflowWithOptions(_ any, o workflow.RegisterOptions) {
	*r = append(*r, o.Name)
}

func registeredWorkflows() []string {
	var r nameRegistry
	RegisterAll(&r)
	return r
}

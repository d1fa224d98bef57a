package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// productPackages are the packages that run with Remedy's identities: the
// worker, the operator, the webhooks, the job executor. Not scanned: `remedy
// dev` and the installer (they run as the person who starts them), the
// kubectl plugin (it writes with its user's own credentials), tests, hack/.
var productPackages = []string{"./activities/...", "./alerts", "./operator/...", "./webhook/...", "./worker", "./workflows",
	"./internal/actions", "./internal/alertrule", "./internal/alertmanager", "./internal/authz", "./internal/metrics", "./internal/policy",
	"./internal/reloadrule", "./internal/webhookauth", "./cmd/remedy"}

// writeExceptions are the only places outside the write gate (activities/gate/gate*.go)
// that write an object Remedy does not own, or write outside the cluster,
// each with why it may. docs/security.md ("Writes outside the gate") lists
// the same, by function; this test fails when either list drifts from the
// code, or a new write appears anywhere else.
var writeExceptions = map[string]string{
	// Writes through what the gate handed out, bound to the checked object.
	"activities/execution/execution.go (*Execution).ExecuteInline": "applies through writer.Resource(), the gate's Writer bound to the checked target",
	"activities/execution/execution.go (*Execution).run":           "inspects and dry-runs with the gate's Inspector, whose transport refuses every write",
	"activities/reload/reload.go patchWorkload":                    "patches through the client (*Reload).pass takes from the gate's Writer, bound to the workload",
	"activities/drift/drift_decision.go (*Drift).editAnnotation":   "patches through writer.Resource(), the gate's Writer bound to the drift parent",
	// The action catalog writes only through the client its caller hands it.
	"internal/actions/run.go run":                                "writes through the ResourceInterface it is handed: a gate Writer's, an Inspector's, or the job executor's",
	"internal/actions/ownership.go takeOwnership":                "as run",
	"internal/actions/ownership.go ApplyAs":                      "as run",
	"internal/actions/removeinit.go (removeInitContainer).Apply": "a dry run, through the client it is handed",
	// The job executor: a Job of Remedy's own in its action namespace, created
	// after Gate.Check; the Pod then writes as the action's ServiceAccount.
	"activities/execution/job.go (*Jobs).ensure":        "creates Remedy's own executor Job in the action namespace, after Gate.Check passed the write",
	"activities/execution/exec.go ExecRequest":          "the executor's write from its Pod, as the action's ServiceAccount, for a run the gate passed",
	"activities/execution/job_ask.go (GateClient).post": "the executor's Pod asks the worker's exec gate immediately before its write: a question, not a write",
	"activities/execution/job_attend.go (*Jobs).remove": "deletes Remedy's own executor Job when its run is canceled, so nothing is left armed",
	// Remedy's own objects, through generic code the scan cannot type.
	"activities/status/status.go writeStatusOnce":        "the status subresource of Remedy's CRDs (its only instantiations)",
	"operator/cleanup.go (*CleanupReconciler).Reconcile": "deletes Remedy's own finished objects after their time to live",
	"webhook/drift_policy.go (*Policies).report":         "patches the status of Remedy's own Kausality policies",
	"webhook/drift_policy.go (*Policies).applyRules":     "updates Remedy's own MutatingWebhookConfiguration remedy-drift",
	// Alertmanager reads share one transport; its writes are in gate_silence.go.
	"internal/alertmanager/client.go (*Client).Call":       "sends what its callers ask; only gate_silence.go calls it with POST or DELETE",
	"internal/alertmanager/auth.go (*Client).RequiresAuth": "one GET without credentials, to refuse an Alertmanager that does not authenticate",
	// Bookkeeping the operator and the drift webhook write themselves,
	// fenced by the remedy-metadata-writers ValidatingAdmissionPolicy
	// (their own annotations only, nothing but metadata) and by RBAC.
	"operator/reload_controller.go (*ReloadReconciler).Reconcile":      "reload baselines: remedy.dev/config-hash-* recorded where the pod template already holds them; no restart",
	"operator/reload_controller.go (*ReloadReconciler).updateDeclined": "drops stale remedy.dev/reload-declined entries, conditional on the resourceVersion planned from",
	"webhook/drift_parent_update.go (*ParentUpdater).apply":            "kausality.io/* bookkeeping on a parent, inside the admission of that parent's own change",
	"webhook/drift_consume.go (*ParentUpdater).ConsumeNow":             "removes the one kausality.io/approvals once-entry the admitted change used",
}

// listed is one package as `go list -export -json` prints it.
type listed struct {
	ImportPath, Dir, Export string
	GoFiles                 []string
	DepOnly                 bool
}

// A write to an object Remedy does not own, or outside the cluster, is made
// in the write gate's files or in the enumerated exceptions, nowhere else.
// The scan type-checks the product packages and finds every call that
// writes: a create, update, patch, delete, apply or eviction on a Kubernetes
// client (typed, dynamic, controller-runtime or REST), an HTTP request sent (net/http Do, Post, PostForm), an action run
// to apply, or an Alertmanager call that is not a GET. A write of Remedy's
// own objects (the remedy.dev and kausality.io types, through
// controller-runtime's typed client), an Event, or a review (a question, not
// a write) is not one.
func TestOnlyTheGateWritesWhatRemedyDoesNotOwn(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	found := scanWrites(t, root)
	used := map[string]bool{}
	for _, w := range found {
		if strings.HasPrefix(filepath.Base(w.file), "gate") && filepath.Dir(w.file) == filepath.Join("activities", "gate") {
			continue
		}
		if _, ok := writeExceptions[w.key()]; ok {
			used[w.key()] = true
			continue
		}
		t.Errorf("%s: %s, outside the write gate and not an enumerated exception (activities/gate/gate_writes_test.go, docs/security.md)", w.pos, w.what)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	require.NoError(t, err)
	for k := range writeExceptions {
		assert.True(t, used[k], "exception %s writes nothing any more: remove it here and in docs/security.md", k)
		file, fn, _ := strings.Cut(k, " ")
		assert.True(t, bytes.Contains(doc, []byte(file)) && bytes.Contains(doc, []byte(fn)), "docs/security.md must name the exception %s", k)
	}
	assert.NotEmpty(t, found, "the scan must see the gate's own writes")
}

// write is one write call found by the scan.
type write struct {
	pos        token.Position
	file, fn   string
	what       string
	inGateFile bool
}

func (w write) key() string { return w.file + " " + w.fn }

func scanWrites(t *testing.T, root string) []write {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-export", "-deps", "-json=ImportPath,Dir,Export,GoFiles,DepOnly"}, productPackages...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	exports := map[string]string{}
	var products []listed
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		exports[p.ImportPath] = p.Export
		if !p.DepOnly {
			products = append(products, p)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if f, ok := exports[path]; ok && f != "" {
			return os.Open(f)
		}
		return nil, fmt.Errorf("no export data for %s", path)
	})
	var found []write
	for _, p := range products {
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			require.NoError(t, err)
			files = append(files, f)
		}
		info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
		_, err := (&types.Config{Importer: imp}).Check(p.ImportPath, fset, files, info)
		require.NoError(t, err, p.ImportPath)
		for _, f := range files {
			rel, _ := filepath.Rel(root, fset.File(f.Pos()).Name())
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok {
					continue
				}
				ast.Inspect(fd, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					if what := writeCall(info, call); what != "" {
						found = append(found, write{pos: fset.Position(call.Pos()), file: rel, fn: funcName(fd), what: what})
					}
					return true
				})
			}
		}
	}
	return found
}

// funcName is fd's name as the exceptions spell it: "(*T).m", "(T).m" or "f".
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	star := ""
	if s, ok := typ.(*ast.StarExpr); ok {
		star, typ = "*", s.X
	}
	if ix, ok := typ.(*ast.IndexExpr); ok {
		typ = ix.X
	}
	id, _ := typ.(*ast.Ident)
	name := ""
	if id != nil {
		name = id.Name
	}
	return "(" + star + name + ")." + fd.Name.Name
}

// kubeWrites are the client methods that change an object.
var kubeWrites = []string{"Create", "Update", "UpdateStatus", "Patch", "Delete", "DeleteCollection", "Apply", "ApplyStatus",
	"Evict", "EvictV1", "EvictV1beta1", "UpdateScale", "ApplyScale", "UpdateEphemeralContainers", "UpdateResize", "Bind"}

// ownedTypes are the objects Remedy owns (its CRDs), its Events, and
// reviews (a question to the API server, not a write).
var ownedTypes = []string{"github.com/remedy-dev/remedy/api/", "k8s.io/api/events/v1.Event", "k8s.io/api/core/v1.Event",
	"k8s.io/api/authorization/", "k8s.io/api/authentication/"}

// notWrites are typed clients whose "writes" are Remedy's own records or questions.
var notWrites = []string{
	"k8s.io/client-go/kubernetes/typed/events/", // Events: Remedy's own records
	"k8s.io/client-go/kubernetes/typed/authorization/",
	"k8s.io/client-go/kubernetes/typed/authentication/",
}

// writeCall describes call if it writes, or returns "".
func writeCall(info *types.Info, call *ast.CallExpr) string {
	var fn *types.Func
	var recv types.Type
	switch f := ast.Unparen(call.Fun).(type) {
	case *ast.SelectorExpr:
		if sel := info.Selections[f]; sel != nil {
			fn, _ = sel.Obj().(*types.Func)
			recv = sel.Recv()
		} else {
			fn, _ = info.Uses[f.Sel].(*types.Func)
		}
	case *ast.Ident:
		fn, _ = info.Uses[f].(*types.Func)
	}
	if fn == nil || fn.Pkg() == nil {
		return ""
	}
	pkg, name := fn.Pkg().Path(), fn.Name()
	switch {
	case pkg == "k8s.io/client-go/rest" && slices.Contains([]string{"Post", "Put", "Patch", "Delete"}, name):
		return "a REST client's " + name
	case pkg == "net/http" && slices.Contains([]string{"Do", "Post", "PostForm"}, name):
		return "an HTTP request sent (net/http " + name + ")"
	case pkg == "github.com/remedy-dev/remedy/internal/actions" && (name == "ApplyOnce" || name == "Run" && !readMode(fn.Pkg(), info, call.Args[len(call.Args)-1])):
		return "an action applied (actions." + name + ")"
	case pkg == "github.com/remedy-dev/remedy/internal/alertmanager" && name == "Call" && !isConst(info, call.Args[1], "GET"):
		return "an Alertmanager write"
	case !slices.Contains(kubeWrites, name):
		return ""
	case pkg == "k8s.io/client-go/dynamic":
		return "a dynamic client's " + name
	case pkg == "sigs.k8s.io/controller-runtime/pkg/client":
		obj := objectArg(info, call)
		if obj == "" || hasPrefix(obj, ownedTypes) {
			return ""
		}
		return "a client " + name + " of " + obj
	case strings.HasPrefix(pkg, "k8s.io/client-go/kubernetes/typed/"), strings.HasPrefix(pkg, "k8s.io/client-go/gentype"):
		r := types.TypeString(recv, nil)
		if hasPrefix(r, notWrites) || strings.HasSuffix(r, "EventInterface") {
			return ""
		}
		return "a typed client's " + name + " (" + r + ")"
	}
	return ""
}

// objectArg is the package-qualified type of a controller-runtime write's
// object (its second argument), or "" if it has none.
func objectArg(info *types.Info, call *ast.CallExpr) string {
	if len(call.Args) < 2 {
		return ""
	}
	t := info.Types[call.Args[1]].Type
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	return types.TypeString(t, nil)
}

func hasPrefix(s string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(s, p) })
}

// readMode reports whether a Run's mode argument is a constant other than actions.Apply.
func readMode(actions *types.Package, info *types.Info, arg ast.Expr) bool {
	v := info.Types[arg].Value
	apply, _ := actions.Scope().Lookup("Apply").(*types.Const)
	return v != nil && apply != nil && constant.Compare(v, token.NEQ, apply.Val())
}

func isConst(info *types.Info, arg ast.Expr, want string) bool {
	v := info.Types[arg].Value
	return v != nil && v.Kind() == constant.String && constant.StringVal(v) == want
}

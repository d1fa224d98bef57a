package gate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/metrics"
)

// Gate is the one place that lets Remedy write to an object it does not
// own. Every such write asks it immediately before writing, so what it
// checks is true at the moment of the write, whatever the run waited for
// before (an approval, preconditions, the steps of a request, a debounce):
//
//   - the subject: the Remedy object the write serves exists with the UID
//     (and spec) the run was started for, has not finished, and names this
//     workflow;
//   - the actor: whoever lends the write their authority (an execution's
//     requester, a ConfigReloadPolicy's author) still holds the grant;
//   - the target's namespace is not protected, and the safety policy does
//     not deny the action.
//
// Only the gate builds clients that impersonate Remedy's writing accounts
// (the remedy-action-<action>, remedy-reload and remedy-drift
// ServiceAccounts), and it hands one out only with a passed check: a write
// that skips the gate has no client to write with (gate_test.go keeps it so).
// Callbacks and silences are writes too: DriftReports are posted only
// through PassCallback (gate_drift.go), Alertmanager silences only through
// PassSilence (gate_silence.go). What the gate hands out is bound to what it
// checked (gate_writer.go); gate_writes_test.go fails on a write anywhere
// else but the exceptions docs/security.md lists.
type Gate struct {
	// Config is the worker's own identity; the writers impersonate on top of it.
	Config *rest.Config
	// ActionNamespace holds the ServiceAccounts the writers impersonate.
	ActionNamespace string
	// Subjects reads the Remedy objects writes are made for, as the worker,
	// always live; Seen keeps what it found for the status pushes.
	Subjects ctrlclient.Reader
	Seen     *Seen
	// Checks asks the requester's grant and the safety policy, as validation does.
	Checks *Validation
	// Callbacks posts DriftReports; PassCallback hands it out for a
	// configured URL only. Drift says which URLs are configured.
	Callbacks *http.Client
	Drift     *DriftConfig
	// Alertmanager is where PassSilence's silences are posted (nil: none is).
	Alertmanager *alertmanager.Client
	// Runs binds reload and drift writes to their subject's open run.
	Runs *OpenRuns

	writers sync.Map // "write/" or "inspect/" + ServiceAccount name -> dynamic.Interface
	// fake, in unit tests only, replaces the impersonating clients.
	fake dynamic.Interface
}

// WithFake, for tests only, makes every client g hands out d instead of an
// impersonating one, so the tests of the packages that write through the
// gate can pass it without a cluster. gate_writes_test.go keeps every
// non-test file from calling it.
func (g *Gate) WithFake(d dynamic.Interface) *Gate {
	g.fake = d
	return g
}

// Write is one write the gate is asked about.
type Write struct {
	Subject Subject `json:"subject"`
	// Request is the write as an action: its action, target and parameters.
	// Its requester is ignored: the gate takes the actor from the subject.
	Request actions.Request `json:"request"`
	// As is the ServiceAccount the write is made as.
	As string `json:"as"`
	// RollbackKey, on a rollback, is the key the run digested its captured
	// inverse with (status.rollbackInformation.parametersDigest).
	RollbackKey []byte `json:"rollbackKey,omitempty"`
}

// Subject kinds: the Remedy objects on whose behalf Remedy writes.
const (
	SubjectExecution = "KubernetesExecution"
	// SubjectReload: a reload restart, made for the ConfigReloadPolicies that select the workload.
	SubjectReload = "ConfigReloadPolicy"
	// SubjectDrift: a drift decision written onto a drifted parent.
	SubjectDrift = "DriftParent"
)

// Subject names the Remedy object a write serves, as the run was told about it.
type Subject struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Execution is the spec a KubernetesExecution's run was started with.
	Execution *v1alpha1.KubernetesExecutionSpec `json:"execution,omitempty"`
	// Reload is what a reload write claims (gate_reload.go); Name is then
	// the policy the run was started for, and the workload is the target.
	Reload *ReloadEvidence `json:"reload,omitempty"`
	// Drift is the decision a drift parent's write records.
	Drift *DriftSubject `json:"drift,omitempty"`
}

// Writer writes one object, the target the gate checked, as the
// ServiceAccount the check named. Its fields are unexported and only Pass
// fills them: a write that skipped the gate has nothing to write with, and
// one that passed it cannot turn to another object (gate_writer.go).
type Writer struct {
	target v1alpha1.ObjectRef
	as     string
	// ri is the target's resource (in its namespace), impersonating as.
	ri dynamic.ResourceInterface
	// reads reads and dry-runs only, as the same account.
	reads dynamic.Interface
}

// Inspector reads and dry-runs as one ServiceAccount; its transport refuses
// every other request, so it needs no gate.
type Inspector struct {
	Dynamic dynamic.Interface
}

// authority is what a verified subject lends a write: whose grant it needs
// (nil: the subject itself was decided by an authorized person, as a drift
// decision is) and for which catalog action, which the safety policy also sees.
type authority struct {
	actor  *v1alpha1.Requester
	action string
	// lenders, when set, are every actor whose grant the write needs, each
	// named for the refusal (the authors of every ConfigReloadPolicy that
	// selects a workload); actor is then the first, as the safety policy sees it.
	lenders []lender
	// protectedOnly: the write runs no catalog action, so the safety policy
	// has nothing to judge; only the protected-namespace rule applies.
	protectedOnly bool
}

// lender is one actor whose grant a write needs, and what made them one.
type lender struct {
	of  string
	who *v1alpha1.Requester
}

// grants lists the actors whose grant the write needs.
func (a authority) grants() []lender {
	if len(a.lenders) > 0 {
		return a.lenders
	}
	if a.actor == nil {
		return nil
	}
	return []lender{{who: a.actor}}
}

// Pass checks w and returns a writer of w's target, as w.As; callers
// write with nothing else.
func (g *Gate) Pass(ctx context.Context, w Write) (Writer, error) {
	if err := g.Check(ctx, w); err != nil {
		return Writer{}, err
	}
	dyn, err := g.writer(w.As)
	if err != nil {
		return Writer{}, err
	}
	ri, err := actions.Resource(dyn, g.Checks.Mapper, w.Request.Target)
	if err != nil {
		return Writer{}, fail.Classify(v1alpha1.ReasonInvalidParameters, fmt.Errorf("resolve %s: %w", w.Request.Target.String(), err))
	}
	reads, err := g.Inspector(w.As)
	if err != nil {
		return Writer{}, err
	}
	return Writer{target: w.Request.Target, as: w.As, ri: ri, reads: reads.Dynamic}, nil
}

// Check checks w without handing out a writer: for a write the worker makes
// as itself on the write's behalf (the job executor's Job, which runs as the
// action's account).
func (g *Gate) Check(ctx context.Context, w Write) error {
	err := g.check(ctx, w)
	result := "passed"
	if err != nil {
		result = "refused"
		activity.GetLogger(ctx).Warn("write refused by the gate", "subject", w.Subject.Kind, "object", w.Subject.Namespace+"/"+w.Subject.Name,
			"action", w.Request.Action, "target", w.Request.Target.String(), "error", err)
	}
	metrics.GateDecisions.WithLabelValues(w.Subject.Kind, result).Inc()
	return err
}

func (g *Gate) check(ctx context.Context, w Write) error {
	var auth authority
	var err error
	switch w.Subject.Kind {
	case SubjectExecution:
		auth, err = g.verifyExecution(ctx, w)
	case SubjectReload:
		auth, err = g.verifyReload(ctx, w)
	case SubjectDrift:
		auth, err = g.verifyDrift(ctx, w)
	default:
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("the write gate knows no subject of kind %q", w.Subject.Kind))
	}
	if err != nil {
		return err
	}
	req := w.Request
	req.Action, req.Requester = auth.action, auth.actor
	if err := g.checkGrants(ctx, w.Subject.Namespace, auth, req.Target); err != nil {
		return err
	}
	if auth.protectedOnly {
		return g.refuseProtected(ctx, w, req)
	}
	pol, err := g.Checks.EvaluatePolicy(ctx, req)
	if err != nil {
		return err
	}
	if !pol.Validation.Allowed {
		reason := v1alpha1.ReasonPolicyDenied
		if pol.Validation.PolicyName == builtinProtected {
			reason = v1alpha1.ReasonProtectedNamespace
		}
		return fail.Permanent(reason, fmt.Errorf("%s %s refused at the write: %s", auth.action, req.Target.String(), strings.Join(pol.Validation.Messages, "; ")))
	}
	activity.GetLogger(ctx).Info("write passed the gate", "subject", w.Subject.Kind, "object", w.Subject.Namespace+"/"+w.Subject.Name,
		"action", auth.action, "target", req.Target.String(), "as", w.As)
	return nil
}

// checkGrants asks whether every actor of auth still holds the grant for the target.
func (g *Gate) checkGrants(ctx context.Context, namespace string, auth authority, target v1alpha1.ObjectRef) error {
	for _, l := range auth.grants() {
		err := g.Checks.CheckRequester(ctx, RequesterCheck{Namespace: namespace, Requester: l.who, Action: auth.action, Target: target})
		var app *temporal.ApplicationError
		if err != nil && l.of != "" && errors.As(err, &app) && app.NonRetryable() {
			return fail.Permanent(app.Type(), fmt.Errorf("%s: %w", l.of, err))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// verifyExecution re-reads the KubernetesExecution: it must be the one the
// run was started for, unfinished, and this workflow's (Subjects.execution),
// and the write its action or captured rollback; its stamped requester is
// the actor, whatever the run's input said.
func (g *Gate) verifyExecution(ctx context.Context, w Write) (authority, error) {
	s := w.Subject
	if s.Execution == nil {
		return authority{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, errors.New("a write for a KubernetesExecution must carry the spec its run was started with"))
	}
	// Live, always: what it keeps in Seen only spares the next status push a read.
	k, err := (&Subjects{Client: g.Subjects, Seen: g.Seen}).execution(ctx, SubjectRef{Namespace: s.Namespace, Name: s.Name, UID: s.UID}, s.Execution)
	if err != nil {
		return authority{}, err
	}
	if !isActionOf(s.Execution, w.Request) && !isRollbackOf(k, w.Request, w.RollbackKey) {
		return authority{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("KubernetesExecution %s/%s runs %s with its parameters, or its captured rollback, only: not this %s",
			s.Namespace, s.Name, s.Execution.Action, w.Request.Action))
	}
	if w.Request.Target != s.Execution.Target {
		return authority{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("KubernetesExecution %s/%s targets %s, not %s",
			s.Namespace, s.Name, s.Execution.Target.String(), w.Request.Target.String()))
	}
	if w.As != actions.ServiceAccountName(w.Request.Action) {
		return authority{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("the %s action writes as %s, not %s", w.Request.Action, actions.ServiceAccountName(w.Request.Action), w.As))
	}
	return authority{actor: k.Spec.Requester, action: w.Request.Action}, nil
}

// isActionOf reports whether req is the action spec asks for, as asked.
func isActionOf(spec *v1alpha1.KubernetesExecutionSpec, req actions.Request) bool {
	var params v1alpha1.ActionParameters
	if spec.Parameters != nil {
		params = *spec.Parameters
	}
	return req.Action == spec.Action && equality.Semantic.DeepEqual(params, req.Params)
}

// isRollbackOf reports whether req is the inverse action the execution's
// status captured. Only the execution's own run writes that status (its
// pushes are refused from any other run, statusRun), so the inverse is what
// that run captured at its write. The status shows the inverse's parameters
// only as the requester may read them, so they are matched by the digest
// made with the run's key; a status without one (a run started before
// digests) shows them in full.
func isRollbackOf(k *v1alpha1.KubernetesExecution, req actions.Request, key []byte) bool {
	rb := k.Status.RollbackInformation
	if rb == nil || !rb.Available || rb.RollbackAction != req.Action {
		return false
	}
	if rb.ParametersDigest != "" {
		return matchesDigest(key, req.Params, rb.ParametersDigest)
	}
	var params v1alpha1.ActionParameters
	if rb.RollbackParameters != nil {
		params = *rb.RollbackParameters
	}
	return equality.Semantic.DeepEqual(params, req.Params)
}

// Inspector returns clients that act as the ServiceAccount name but can
// change nothing: their transport refuses every request that is not a read
// or a server-side dry run. Validation reads targets and dry-runs writes with
// them, without passing the gate.
func (g *Gate) Inspector(name string) (Inspector, error) {
	dyn, err := g.clients("inspect/"+name, name, func(rt http.RoundTripper) http.RoundTripper { return readOnly{rt} })
	return Inspector{Dynamic: dyn}, err
}

// readOnly lets through reads and server-side dry runs only.
type readOnly struct{ next http.RoundTripper }

func (r readOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	switch {
	case req.Method == http.MethodGet || req.Method == http.MethodHead:
	case req.URL.Query().Get("dryRun") == metav1.DryRunAll:
	default:
		return nil, fmt.Errorf("%s %s refused: an inspecting client may only read and dry-run; writes pass the write gate", req.Method, req.URL.Path)
	}
	return r.next.RoundTrip(req)
}

// writer returns the cached client that impersonates the ServiceAccount name.
func (g *Gate) writer(name string) (dynamic.Interface, error) {
	return g.clients("write/"+name, name, nil)
}

func (g *Gate) clients(key, name string, wrap func(http.RoundTripper) http.RoundTripper) (dynamic.Interface, error) {
	if g.fake != nil {
		return g.fake, nil
	}
	if c, ok := g.writers.Load(key); ok {
		return c.(dynamic.Interface), nil
	}
	cfg := rest.CopyConfig(g.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + g.ActionNamespace + ":" + name}
	if wrap != nil {
		cfg.Wrap(wrap)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("build client for %s: %w", name, err)
	}
	c, _ := g.writers.LoadOrStore(key, dyn)
	return c.(dynamic.Interface), nil
}

package alerts

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/sync/errgroup"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertrule"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/workflows"
)

// Path is where the worker serves the receiver.
const Path = "/alerts"

// Defaults of the receiver's bounds.
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultMaxAge       = 24 * time.Hour
	DefaultMaxSkew      = 5 * time.Minute
	// DefaultTemporalTimeout is under Alertmanager's shortest notification timeout (10s).
	DefaultTemporalTimeout = 8 * time.Second
)

// Temporal is the part of client.Client the receiver uses.
type Temporal interface {
	SignalWithStartWorkflow(ctx context.Context, workflowID, signalName string, signalArg any,
		options client.StartWorkflowOptions, workflow any, workflowArgs ...any) (client.WorkflowRun, error)
	SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error
}

// Receiver handles Alertmanager's webhook notifications.
type Receiver struct {
	Temporal Temporal
	// Rules lists the RemediationRules of an alert's namespace.
	Rules ctrlclient.Reader
	// TokenFile holds the bearer token Alertmanager sends
	// (http_config.authorization.credentials_file, from the same Secret);
	// it is read on each request, so a rotated Secret applies at once.
	TokenFile string
	// ClientCerts admits requests whose TLS client certificate the server
	// verified against its client CA (the server's tls.Config decides).
	ClientCerts bool
	// MaxBodyBytes caps a payload (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// MaxAge refuses a firing alert that started longer ago (default
	// DefaultMaxAge); MaxSkew one that starts in the future (default DefaultMaxSkew).
	MaxAge, MaxSkew time.Duration
	// TemporalTimeout bounds handing one notification to Temporal (default
	// DefaultTemporalTimeout): past it the answer is 503 and Alertmanager retries.
	TemporalTimeout time.Duration
	Log             logr.Logger
	Now             func() time.Time

	handed handedOver
}

// response is the JSON body of every answer, for Alertmanager's logs and people.
type response struct {
	Accepted  int    `json:"accepted"`
	Unmatched int    `json:"unmatched"`
	Stale     int    `json:"stale"`
	Error     string `json:"error,omitempty"`
}

func (h *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.answer(w, http.StatusMethodNotAllowed, response{Error: "POST Alertmanager's webhook payload"})
		return
	}
	if !h.authenticated(r) {
		metrics.AlertsReceived.WithLabelValues("unauthorized").Inc()
		h.Log.Info("alert notification refused: not authenticated", "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="remedy-alerts"`)
		h.answer(w, http.StatusUnauthorized, response{Error: "unauthenticated: send the bearer token or a client certificate"})
		return
	}
	limit := h.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		metrics.AlertsReceived.WithLabelValues("too_large").Inc()
		h.Log.Info("alert notification refused: body over the cap", "remote", r.RemoteAddr, "limit", limit)
		h.answer(w, http.StatusRequestEntityTooLarge, response{Error: fmt.Sprintf("body over %d bytes", limit)})
		return
	}
	if err != nil {
		h.answer(w, http.StatusBadRequest, response{Error: "read body: " + err.Error()})
		return
	}
	msg, err := decode(body)
	if err != nil {
		metrics.AlertsReceived.WithLabelValues("malformed").Inc()
		h.Log.Info("alert notification refused: malformed", "remote", r.RemoteAddr, "error", err.Error())
		h.answer(w, http.StatusBadRequest, response{Error: err.Error()})
		return
	}
	if msg.TruncatedAlerts > 0 {
		h.Log.Info("notification truncated by Alertmanager's max_alerts: the sweep and repeats deliver the rest", "groupKey", msg.GroupKey, "truncated", msg.TruncatedAlerts)
	}
	timeout := h.TemporalTimeout
	if timeout <= 0 {
		timeout = DefaultTemporalTimeout
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	res, err := h.deliver(ctx, msg)
	if err != nil {
		metrics.AlertsReceived.WithLabelValues("temporal_unavailable").Inc()
		h.Log.Error(err, "alert notification not handed to Temporal: Alertmanager retries it", "groupKey", msg.GroupKey)
		res.Error = err.Error()
		h.answer(w, http.StatusServiceUnavailable, res)
		return
	}
	h.answer(w, http.StatusOK, res)
}

func (h *Receiver) answer(w http.ResponseWriter, code int, r response) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(r)
}

// authenticated admits a verified client certificate (when enabled) or the
// bearer token of TokenFile; with neither configured it admits nothing.
func (h *Receiver) authenticated(r *http.Request) bool {
	if h.ClientCerts && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return true
	}
	if h.TokenFile == "" {
		return false
	}
	raw, err := os.ReadFile(h.TokenFile)
	want := strings.TrimSpace(string(raw))
	if err != nil || want == "" {
		h.Log.Error(err, "bearer token unreadable: refusing every token", "file", h.TokenFile)
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(want)) == 1
}

// deliver hands every matching alert to its workflow, several at once. On
// a Temporal error it answers 503: Alertmanager resends the whole
// notification, and what was delivered before folds into the same workflows.
func (h *Receiver) deliver(ctx context.Context, msg *Message) (response, error) {
	var res response
	now := h.now()
	rules := map[string][]v1alpha1.RemediationRule{}
	type delivery struct {
		rule  *v1alpha1.RemediationRule
		alert Alert
	}
	var work []delivery
	for _, a := range msg.Alerts {
		ns := a.Labels[alertrule.NamespaceLabel]
		if ns == "" {
			res.Unmatched++
			metrics.AlertsReceived.WithLabelValues("unmatched").Inc()
			continue
		}
		if a.Status == "firing" && (a.StartsAt.After(now.Add(h.skew())) || now.Sub(a.StartsAt) > h.maxAge()) {
			res.Stale++
			metrics.AlertsReceived.WithLabelValues("stale").Inc()
			h.Log.Info("alert refused: startsAt outside the freshness bounds", "fingerprint", a.Fingerprint, "startsAt", a.StartsAt)
			continue
		}
		list, ok := rules[ns]
		if !ok {
			var l v1alpha1.RemediationRuleList
			if err := h.Rules.List(ctx, &l, ctrlclient.InNamespace(ns)); err != nil {
				return res, fmt.Errorf("list RemediationRules in %s: %w", ns, err)
			}
			list, rules[ns] = l.Items, l.Items
		}
		matched := false
		for i := range list {
			rule := &list[i]
			ms, err := alertrule.Matchers(&rule.Spec)
			if err != nil || rule.Spec.Suspend || !alertrule.Matches(ns, ms, a.Labels) {
				continue
			}
			matched = true
			work = append(work, delivery{rule, a})
		}
		if matched {
			res.Accepted++
			metrics.AlertsReceived.WithLabelValues("accepted").Inc()
		} else {
			res.Unmatched++
			metrics.AlertsReceived.WithLabelValues("unmatched").Inc()
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(deliveryParallelism)
	for _, d := range work {
		g.Go(func() error { return h.signal(gctx, d.rule, d.alert) })
	}
	return res, g.Wait()
}

// deliveryParallelism bounds the Temporal calls one notification makes at once.
const deliveryParallelism = 16

// signal starts the alert's workflow with a firing notification, or
// signals it; a resolve for a workflow that is not open is nothing to do.
func (h *Receiver) signal(ctx context.Context, rule *v1alpha1.RemediationRule, a Alert) error {
	id := v1alpha1.AlertWorkflowID(rule.Namespace, rule.Name, a.Fingerprint)
	note := workflows.AlertSignal{Status: a.Status, EndsAt: a.EndsAt}
	if a.Status == workflows.AlertResolved {
		err := h.Temporal.SignalWorkflow(ctx, id, "", workflows.SignalAlert, note)
		var nf *serviceerror.NotFound
		if err == nil || errors.As(err, &nf) {
			h.handed.forget(id, a.StartsAt)
			return nil
		}
		return fmt.Errorf("signal %s: %w", id, err)
	}
	if h.handed.recently(id, a.StartsAt, h.now()) {
		metrics.AlertsRedelivered.Inc()
		return nil
	}
	in := workflows.AlertInput{Namespace: rule.Namespace, Rule: rule.Name, Alert: alertrule.Alert{
		Labels: a.Labels, Annotations: a.Annotations, Fingerprint: a.Fingerprint, StartsAt: a.StartsAt, GeneratorURL: a.GeneratorURL}}
	_, err := h.Temporal.SignalWithStartWorkflow(ctx, id, workflows.SignalAlert, note, client.StartWorkflowOptions{
		ID: id, TaskQueue: workflows.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrKind.ValueSet("Alert"),
			workflows.AttrRule.ValueSet(rule.Namespace+"/"+rule.Name), workflows.AttrAlert.ValueSet(a.Fingerprint),
			workflows.AttrTarget.ValueSet(rule.Namespace+"/Alert/"+a.Labels["alertname"])),
	}, "AlertWorkflow", in)
	if err != nil {
		return fmt.Errorf("signal-with-start %s: %w", id, err)
	}
	h.handed.remember(id, a.StartsAt, h.now())
	return nil
}

func (h *Receiver) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

func (h *Receiver) maxAge() time.Duration {
	if h.MaxAge > 0 {
		return h.MaxAge
	}
	return DefaultMaxAge
}

func (h *Receiver) skew() time.Duration {
	if h.MaxSkew > 0 {
		return h.MaxSkew
	}
	return DefaultMaxSkew
}

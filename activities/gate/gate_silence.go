package gate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/alertrule"
	"github.com/remedy-dev/remedy/internal/metrics"
)

// SubjectSilence: an Alertmanager silence, held for the alert a
// RemediationRule's run remediates. A silence is a write outside the
// cluster, made in the rule author's name.
const SubjectSilence = "AlertSilence"

// defaultSilenceDuration is spec.silence.duration's default (the CRD's).
const defaultSilenceDuration = 10 * time.Minute

// Silencer posts and expires the one silence the gate checked: matchers
// equal to the verified alert's labels, the comment naming its rule, workflow
// and run, no longer than the rule's spec.silence.duration. Its fields are
// unexported and only PassSilence and PassSilenceEnd fill them.
type Silencer struct {
	am       *alertmanager.Client
	matchers []alertmanager.SilenceMatcher
	// comment is the whole comment a held silence carries; prefix is the
	// part that names the rule and the workflow, whatever the run.
	comment, prefix string
	// longest bounds EndsAt - now.
	longest time.Duration
	// id, for an expiry, is the one silence it may expire.
	id string
}

// SilenceComment is the comment of the silence a run holds; prefix names
// the rule and the workflow only.
func SilenceComment(namespace, rule, workflowID, runID string) (comment, prefix string) {
	prefix = fmt.Sprintf("Remedy is remediating this alert: RemediationRule %s/%s, workflow %s, run ", namespace, rule, workflowID)
	return prefix + runID, prefix
}

// PassSilence is the gate of a silence. It believes nothing of s before it
// re-reads it: the run is the alert's own workflow; the RemediationRule
// exists, is not suspended, asks for silences and still matches the
// labels, which name its namespace; Alertmanager holds an alert with
// exactly these labels as firing; the rule's namespace is not protected;
// and the rule's author still holds the grant for every step the alert
// renders. The silence it hands out covers those labels only, each with =,
// so it reaches no alert outside the rule's namespace.
func (g *Gate) PassSilence(ctx context.Context, s AlertSubject) (Silencer, error) {
	sil, err := g.checkSilence(ctx, s)
	g.silenceDecision(ctx, s.Namespace, s.Rule, err)
	return sil, err
}

func (g *Gate) checkSilence(ctx context.Context, s AlertSubject) (Silencer, error) {
	info := activity.GetInfo(ctx).WorkflowExecution
	if info.ID != v1alpha1.AlertWorkflowID(s.Namespace, s.Rule, s.Alert.Fingerprint) || alertmanager.Fingerprint(s.Alert.Labels) != s.Alert.Fingerprint {
		return Silencer{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("workflow %s may not silence alert %s", info.ID, s.Alert.Fingerprint))
	}
	if g.Alertmanager == nil {
		return Silencer{}, fail.Permanent(v1alpha1.ReasonInvalidParameters, errors.New("the worker has no Alertmanager (--alertmanager-url) to silence the alert in"))
	}
	var rule v1alpha1.RemediationRule
	err := g.Subjects.Get(ctx, ctrlclient.ObjectKey{Namespace: s.Namespace, Name: s.Rule}, &rule)
	if apierrors.IsNotFound(err) {
		return Silencer{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("read RemediationRule %s/%s: %w", s.Namespace, s.Rule, err))
	} else if err != nil {
		return Silencer{}, fmt.Errorf("read RemediationRule %s/%s: %w", s.Namespace, s.Rule, err)
	}
	switch {
	case rule.Spec.Suspend:
		return Silencer{}, fail.Permanent(v1alpha1.ReasonAlertSuspended, fmt.Errorf("RemediationRule %s/%s is suspended", s.Namespace, s.Rule))
	case rule.Spec.Silence == nil || !rule.Spec.Silence.Enabled:
		return Silencer{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("RemediationRule %s/%s does not ask for silences (spec.silence)", s.Namespace, s.Rule))
	case rule.Spec.Author == nil:
		return Silencer{}, fail.Permanent(v1alpha1.ReasonForbidden, fmt.Errorf("RemediationRule %s/%s has no author: apply its spec again", s.Namespace, s.Rule))
	}
	ms, err := alertrule.Matchers(&rule.Spec)
	if err != nil {
		return Silencer{}, fail.Permanent(v1alpha1.ReasonInvalidParameters, err)
	}
	if !alertrule.Matches(s.Namespace, ms, s.Alert.Labels) {
		return Silencer{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("RemediationRule %s/%s does not match the labels %v: a silence covers only an alert of the rule's own namespace that it matches",
			s.Namespace, s.Rule, s.Alert.Labels))
	}
	matchers := alertmanager.EqualMatchers(s.Alert.Labels)
	if err := silenceInNamespace(s.Namespace, matchers); err != nil {
		return Silencer{}, err
	}
	if err := g.alertFires(ctx, s); err != nil {
		return Silencer{}, err
	}
	if err := g.refuseProtected(ctx, Write{Subject: Subject{Kind: SubjectSilence, Namespace: s.Namespace, Name: s.Rule}},
		silenceRequest(s)); err != nil {
		return Silencer{}, err
	}
	workload, missing, err := AlertWorkload(ctx, g.Subjects, s.Namespace, &rule.Spec, s.Alert)
	if err != nil {
		return Silencer{}, err
	}
	steps, err := alertrule.RenderFor(s.Namespace, rule.Spec.Template, s.Alert, workload, missing)
	if err != nil {
		return Silencer{}, fail.Permanent(v1alpha1.ReasonInvalidParameters, fmt.Errorf("render RemediationRule %s/%s: %w", s.Namespace, s.Rule, err))
	}
	author := []lender{{of: "the author of RemediationRule " + s.Namespace + "/" + s.Rule, who: rule.Spec.Author}}
	for _, st := range steps {
		if err := g.checkGrants(ctx, s.Namespace, authority{action: st.Execution.Action, lenders: author}, st.Execution.Target); err != nil {
			return Silencer{}, err
		}
	}
	longest := defaultSilenceDuration
	if d := rule.Spec.Silence.Duration; d != nil {
		if p, err := d.Parse(); err == nil && p > 0 {
			longest = p
		}
	}
	comment, prefix := SilenceComment(s.Namespace, s.Rule, info.ID, info.RunID)
	return Silencer{am: g.Alertmanager, matchers: matchers, comment: comment, prefix: prefix, longest: longest}, nil
}

// silenceInNamespace refuses matchers that could select an alert of another
// namespace: every matcher must be an equality, and one must be
// namespace="<namespace>".
func silenceInNamespace(namespace string, ms []alertmanager.SilenceMatcher) error {
	scoped := false
	for _, m := range ms {
		if m.IsRegex || !m.IsEqual {
			return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("silence matcher %s is not an equality: a silence names its alert's labels exactly", m.Name))
		}
		if m.Name == alertrule.NamespaceLabel {
			if m.Value != namespace {
				return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("silence matcher %s=%q reaches beyond the rule's namespace %q", m.Name, m.Value, namespace))
			}
			scoped = true
		}
	}
	if !scoped {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("a silence must match %s=%q: without it, it reaches every namespace", alertrule.NamespaceLabel, namespace))
	}
	return nil
}

// alertFires requires Alertmanager to hold an alert with exactly s's labels
// (silenced ones too: the run's own silence does not stop it firing).
func (g *Gate) alertFires(ctx context.Context, s AlertSubject) error {
	active, err := g.Alertmanager.Active(ctx, s.Namespace)
	if err != nil {
		return err
	}
	for _, al := range active {
		if al.Fingerprint == s.Alert.Fingerprint && maps.Equal(al.Labels, s.Alert.Labels) && al.Status.State != "resolved" {
			return nil
		}
	}
	return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("alert %s is not firing in Alertmanager: nothing to silence", s.Alert.Fingerprint))
}

// PassSilenceEnd is the gate of a silence's expiry: the silence id must be
// one Remedy created for this run of this workflow's rule and alert. Ending it needs no
// grant: it only undoes what the run itself posted.
func (g *Gate) PassSilenceEnd(ctx context.Context, id string) (Silencer, error) {
	caller := activity.GetInfo(ctx).WorkflowExecution
	wf := caller.ID
	parts := strings.Split(wf, "/")
	var err error
	var s Silencer
	switch {
	case len(parts) != 4 || parts[0] != "alert":
		err = fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("workflow %s is no alert's workflow: it holds no silence", wf))
	case g.Alertmanager == nil:
		err = fail.Permanent(v1alpha1.ReasonInvalidParameters, errors.New("the worker has no Alertmanager (--alertmanager-url)"))
	default:
		// Only the run that holds it: its comment names the run, as Temporal's server names the caller.
		comment, prefix := SilenceComment(parts[1], parts[2], wf, caller.RunID)
		s = Silencer{am: g.Alertmanager, comment: comment, prefix: prefix, id: id}
	}
	g.silenceDecision(ctx, partOr(parts, 1), partOr(parts, 2), err)
	return s, err
}

func partOr(parts []string, i int) string {
	if i < len(parts) {
		return parts[i]
	}
	return ""
}

// silenceDecision counts and logs one decision of the silence gate.
func (g *Gate) silenceDecision(ctx context.Context, namespace, rule string, err error) {
	result := "passed"
	if err != nil {
		result = "refused"
		activity.GetLogger(ctx).Warn("silence refused by the gate", "rule", namespace+"/"+rule, "error", err)
	} else {
		activity.GetLogger(ctx).Info("silence passed the gate", "rule", namespace+"/"+rule)
	}
	metrics.GateDecisions.WithLabelValues(SubjectSilence, result).Inc()
}

// silenceRequest is the silence as the protected-namespace rule sees it.
func silenceRequest(s AlertSubject) actions.Request {
	return actions.Request{Action: "silence", Target: v1alpha1.ObjectRef{APIVersion: "monitoring.remedy.dev/v1", Kind: SubjectSilence, Namespace: s.Namespace, Name: s.Rule}}
}

// Comment is the comment the checked silence carries; a retried create
// finds its silence by it.
func (s Silencer) Comment() string { return s.comment }

// Put creates the checked silence from startsAt to endsAt, or updates the
// silence id, which must be this run's own (Alertmanager may answer an
// update with a new ID), and returns its ID.
func (s Silencer) Put(ctx context.Context, id string, startsAt, endsAt time.Time) (string, error) {
	if s.am == nil || s.matchers == nil {
		return "", errors.New("silence refused: this silencer was not handed out by the write gate")
	}
	if max := time.Now().Add(s.longest + time.Minute); endsAt.After(max) {
		return "", fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("a silence ending %s outlasts the rule's spec.silence.duration %s", endsAt.Format(time.RFC3339), s.longest))
	}
	if id != "" {
		if _, err := s.own(ctx, id, s.comment); err != nil {
			return "", err
		}
	}
	body := alertmanager.Silence{ID: id, Matchers: s.matchers, StartsAt: startsAt, EndsAt: endsAt, CreatedBy: alertmanager.SilenceCreator, Comment: s.comment}
	var out struct {
		SilenceID string `json:"silenceID"`
	}
	if err := s.am.Call(ctx, http.MethodPost, "/api/v2/silences", body, &out); err != nil {
		return "", fmt.Errorf("post alertmanager silence: %w", err)
	}
	return out.SilenceID, nil
}

// Expire ends the silence PassSilenceEnd checked; one already expired or
// gone is no error.
func (s Silencer) Expire(ctx context.Context) error {
	if s.am == nil || s.id == "" {
		return errors.New("expiry refused: this silencer was not handed out by the write gate")
	}
	cur, err := s.own(ctx, s.id, s.comment)
	var am *alertmanager.APIError
	if errors.As(err, &am) && am.Status == http.StatusNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	if cur.Status != nil && cur.Status.State == "expired" {
		return nil
	}
	if err := s.am.Call(ctx, http.MethodDelete, "/api/v2/silence/"+url.PathEscape(s.id), nil, nil); err != nil {
		return fmt.Errorf("expire alertmanager silence %s: %w", s.id, err)
	}
	return nil
}

// own reads the silence id and requires it to be Remedy's, for this rule
// and workflow (and, when comment is set, exactly that run's).
func (s Silencer) own(ctx context.Context, id, comment string) (alertmanager.Silence, error) {
	var cur alertmanager.Silence
	if err := s.am.Call(ctx, http.MethodGet, "/api/v2/silence/"+url.PathEscape(id), nil, &cur); err != nil {
		return cur, fmt.Errorf("read alertmanager silence %s: %w", id, err)
	}
	mine := cur.CreatedBy == alertmanager.SilenceCreator && strings.HasPrefix(cur.Comment, s.prefix)
	if comment != "" {
		mine = mine && cur.Comment == comment
	}
	if !mine {
		return cur, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("silence %s is not one this run holds (created by %q: %q)", id, cur.CreatedBy, cur.Comment))
	}
	return cur, nil
}

package alerts

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertrule"
	"github.com/remedy-dev/remedy/internal/metrics"
)

// AlertGateInput asks which of the rule's gates hold the run now.
type AlertGateInput struct {
	Subject gate.AlertSubject `json:"subject"`
	RuleUID string            `json:"ruleUID"`
	// Freeze: a freeze calendar holds the run (its action is Wait); Gate:
	// blockWhileFiring holds it.
	Freeze bool `json:"freeze,omitempty"`
	Gate   bool `json:"gate,omitempty"`
}

// AlertGates is what holds the run: nothing (Reason empty), a freeze until
// Until, a firing alert, or an Alertmanager that cannot be read.
type AlertGates struct {
	Reason  string     `json:"reason,omitempty"`
	Message string     `json:"message,omitempty"`
	Until   *time.Time `json:"until,omitempty"`
}

// CheckGates reads the rule again, so a freeze lifted or a gate removed
// while a run waits frees it, and reports the first gate that holds: the
// freeze calendar (evaluated here, in the worker's time zone database, so
// the workflow only sleeps until the answer's Until), then blockWhileFiring
// against Alertmanager. An Alertmanager that cannot be read holds the run.
func (a *Alerts) CheckGates(ctx context.Context, in AlertGateInput) (AlertGates, error) {
	s := in.Subject
	if id := activity.GetInfo(ctx).WorkflowExecution.ID; id != v1alpha1.AlertWorkflowID(s.Namespace, s.Rule, s.Alert.Fingerprint) {
		return AlertGates{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("workflow %s is not the workflow of alert %s for rule %s/%s", id, s.Alert.Fingerprint, s.Namespace, s.Rule))
	}
	var rule v1alpha1.RemediationRule
	if err := a.Client.Get(ctx, ctrlclient.ObjectKey{Namespace: s.Namespace, Name: s.Rule}, &rule); err != nil {
		return AlertGates{}, fail.Classify(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("read RemediationRule %s/%s: %w", s.Namespace, s.Rule, err))
	}
	if string(rule.UID) != in.RuleUID {
		return AlertGates{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("RemediationRule %s/%s was replaced", s.Namespace, s.Rule))
	}
	if in.Freeze {
		if g, err := frozen(rule.Spec.Freeze, time.Now()); err != nil || g.Reason != "" {
			return g, err
		}
	}
	if in.Gate && len(rule.Spec.BlockWhileFiring) > 0 {
		return a.gated(ctx, s.Namespace, &rule.Spec), nil
	}
	return AlertGates{}, nil
}

// frozen is the freeze calendar's answer at now.
func frozen(f *v1alpha1.FreezeSpec, now time.Time) (AlertGates, error) {
	ivs, err := alertrule.FreezeIntervals(f)
	if err != nil {
		return AlertGates{}, fail.Permanent(v1alpha1.ReasonInvalidParameters, err)
	}
	until, ok := alertrule.FrozenUntil(ivs, now)
	if !ok {
		return AlertGates{}, nil
	}
	until = until.UTC()
	return AlertGates{Reason: v1alpha1.ReasonFrozen, Until: &until,
		Message: "inside the rule's change freeze (spec.freeze): waiting until " + until.Format(time.RFC3339)}, nil
}

// gated asks Alertmanager for firing alerts that match any of the rule's
// blockWhileFiring entries; silenced and inhibited alerts still fire. The
// gate reads every namespace's alerts (it is for cluster-wide health), but
// the answer, which lands in the rule's status, names only an alert of the
// rule's own namespace or one with no namespace label: an alert of another
// tenant holds the run without its name or fingerprint.
func (a *Alerts) gated(ctx context.Context, namespace string, spec *v1alpha1.RemediationRuleSpec) AlertGates {
	sets, err := alertrule.GateMatchers(spec)
	if err != nil {
		return AlertGates{Reason: v1alpha1.ReasonGateUnknown, Message: "spec.blockWhileFiring: " + err.Error()}
	}
	if a.Alertmanager == nil {
		return AlertGates{Reason: v1alpha1.ReasonGateUnknown, Message: "the worker has no Alertmanager (--alertmanager-url) to read spec.blockWhileFiring from: held until it has"}
	}
	var foreign string
	for _, ms := range sets {
		filter := make([]string, 0, len(ms))
		for _, m := range ms {
			filter = append(filter, m.String())
		}
		firing, err := a.Alertmanager.Matching(ctx, filter)
		if err != nil {
			return AlertGates{Reason: v1alpha1.ReasonGateUnknown, Message: "Alertmanager cannot be read, so spec.blockWhileFiring holds the run: " + err.Error()}
		}
		for _, al := range firing {
			if al.Status.State == "resolved" {
				continue
			}
			if ns, ok := al.Labels[alertrule.NamespaceLabel]; ok && ns != namespace {
				if foreign == "" {
					foreign = strings.Join(filter, ",")
				}
				continue
			}
			return AlertGates{Reason: v1alpha1.ReasonGatedByAlert, Message: fmt.Sprintf("alert %s (%s) fires and matches spec.blockWhileFiring %s: waiting until it resolves",
				al.Labels["alertname"], al.Fingerprint, strings.Join(filter, ","))}
		}
	}
	if foreign != "" {
		return AlertGates{Reason: v1alpha1.ReasonGatedByAlert, Message: fmt.Sprintf("an alert of another namespace fires and matches spec.blockWhileFiring %s: waiting until it resolves", foreign)}
	}
	return AlertGates{}
}

// SilenceInput asks for the alert's silence to be created or renewed.
type SilenceInput struct {
	Subject gate.AlertSubject `json:"subject"`
	// ID is the silence to renew; empty creates one.
	ID       string        `json:"id,omitempty"`
	Duration time.Duration `json:"duration"`
}

// HoldSilence creates a silence in Alertmanager whose matchers are the
// alert's labels, each with =, lasting Duration, created by "remedy" with a
// comment naming the run; or renews the silence ID for Duration from now.
// The write gate checks the silence first (PassSilence) and hands out the
// only way to post it. A retried create finds its silence by that comment.
// A silence that a person expired is not recreated: the answer is then "".
func (a *Alerts) HoldSilence(ctx context.Context, in SilenceInput) (string, error) {
	if a.Gate == nil || a.Alertmanager == nil {
		return "", fail.Permanent(v1alpha1.ReasonInvalidParameters, fmt.Errorf("the worker has no Alertmanager (--alertmanager-url) to silence the alert in"))
	}
	if err := a.holdsPermit(ctx, in.Subject.Namespace); err != nil {
		return "", err
	}
	silencer, err := a.Gate.PassSilence(ctx, in.Subject)
	if err != nil {
		metrics.AlertSilences.WithLabelValues("failed").Inc()
		return "", err
	}
	now := time.Now().UTC()
	id, start, op := "", now, "created"
	mine, err := a.Alertmanager.Silences(ctx)
	if err != nil {
		metrics.AlertSilences.WithLabelValues("failed").Inc()
		return "", err
	}
	for _, o := range mine {
		if o.Comment != silencer.Comment() || (in.ID != "" && o.ID != in.ID) {
			continue
		}
		if o.Status != nil && o.Status.State == "expired" {
			if in.ID != "" {
				return "", nil
			}
			continue
		}
		// Same matchers and start: Alertmanager extends it in place, same ID.
		id, start, op = o.ID, o.StartsAt, "renewed"
		break
	}
	if in.ID != "" && id == "" {
		return "", nil
	}
	until := now.Add(in.Duration)
	id, err = silencer.Put(ctx, id, start, until)
	if err != nil {
		metrics.AlertSilences.WithLabelValues("failed").Inc()
		return "", err
	}
	metrics.AlertSilences.WithLabelValues(op).Inc()
	activity.GetLogger(ctx).Info("alert silenced", "silence", id, "op", op, "until", until)
	return id, nil
}

// EndSilence expires the run's silence, so the alert notifies again if it
// still fires once the remediation ended. The gate lets a run expire only
// a silence Remedy made for its own alert.
func (a *Alerts) EndSilence(ctx context.Context, id string) error {
	if a.Gate == nil || a.Alertmanager == nil || id == "" {
		return nil
	}
	silencer, err := a.Gate.PassSilenceEnd(ctx, id)
	if err == nil {
		err = silencer.Expire(ctx)
	}
	if err != nil {
		metrics.AlertSilences.WithLabelValues("failed").Inc()
		return err
	}
	metrics.AlertSilences.WithLabelValues("expired").Inc()
	return nil
}

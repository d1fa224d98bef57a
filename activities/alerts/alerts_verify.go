package alerts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/alertrule"
)

// FiringCheck asks which of the alerts a run answers for still fire.
type FiringCheck struct {
	Namespace string `json:"namespace"`
	Rule      string `json:"rule"`
	// Fingerprint is the run's own alert; Joined are the alerts that joined it.
	Fingerprint string   `json:"fingerprint"`
	Joined      []string `json:"joined,omitempty"`
}

// LadderStep is one rendered rung of spec.escalation.
type LadderStep struct {
	Name     string                     `json:"name"`
	Steps    []v1alpha1.RemediationStep `json:"steps,omitempty"`
	Rollback v1alpha1.RollbackPolicy    `json:"rollback,omitempty"`
	Page     bool                       `json:"page,omitempty"`
}

// StillFiring returns the fingerprints among the run's alerts that
// Alertmanager still holds as firing (silenced and inhibited ones too).
// It never guesses: an Alertmanager that cannot be read is an error the
// activity retries; one that answers without credentials, or none
// configured, cannot prove an alert resolved, so every alert still fires.
func (a *Alerts) StillFiring(ctx context.Context, in FiringCheck) ([]string, error) {
	if id := activity.GetInfo(ctx).WorkflowExecution.ID; id != v1alpha1.AlertWorkflowID(in.Namespace, in.Rule, in.Fingerprint) {
		return nil, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("workflow %s is not the workflow of alert %s for rule %s/%s", id, in.Fingerprint, in.Namespace, in.Rule))
	}
	return a.firingOf(ctx, in.Namespace, append([]string{in.Fingerprint}, in.Joined...))
}

// firingOf returns the fingerprints among all that Alertmanager holds as
// firing in namespace: all of them when it cannot prove otherwise.
func (a *Alerts) firingOf(ctx context.Context, namespace string, all []string) ([]string, error) {
	if a.Alertmanager == nil {
		return all, nil
	}
	if err := a.Alertmanager.RequiresAuth(ctx); err != nil {
		var open *alertmanager.OpenError
		if errors.As(err, &open) {
			return all, nil
		}
		return nil, fmt.Errorf("check alertmanager credentials: %w", err)
	}
	if err := a.upLongEnough(ctx); err != nil {
		return nil, err
	}
	active, err := a.Alertmanager.Active(ctx, namespace)
	if err != nil {
		return nil, err
	}
	var firing []string
	for _, fp := range all {
		if slices.ContainsFunc(active, func(al alertmanager.ActiveAlert) bool { return al.Fingerprint == fp }) {
			firing = append(firing, fp)
		}
	}
	return firing, nil
}

// ladder renders each rung of the rule's escalation from the alert.
func ladder(namespace string, spec *v1alpha1.RemediationRuleSpec, al alertrule.Alert) ([]LadderStep, error) {
	var out []LadderStep
	for _, e := range spec.Escalation {
		s := LadderStep{Name: e.Name, Page: e.Page}
		if e.Template != nil {
			steps, err := alertrule.Render(namespace, *e.Template, al)
			if err != nil {
				return nil, fmt.Errorf("escalation step %s: %w", e.Name, err)
			}
			s.Steps, s.Rollback = steps, e.Template.RollbackPolicy
		}
		out = append(out, s)
	}
	return out, nil
}

// JoinedFingerprint is the fingerprint of an alert workflow ID of rule
// (alert/<namespace>/<rule>/<fingerprint>), or "" when id is another rule's.
func JoinedFingerprint(namespace, rule, id string) string {
	fp, ok := strings.CutPrefix(id, v1alpha1.AlertWorkflowID(namespace, rule, ""))
	if !ok || fp == "" || strings.Contains(fp, "/") {
		return ""
	}
	return fp
}

// upLongEnough fails, to be retried, while Alertmanager has been up less
// than RestartGrace: it keeps no alerts across a restart, so until its
// senders send theirs again an alert missing from its list may still fire,
// and a fix would be Verified (or a held alert dropped) on a guess.
func (a *Alerts) upLongEnough(ctx context.Context) error {
	started, err := a.Alertmanager.Started(ctx)
	if err != nil {
		return err
	}
	grace := a.RestartGrace
	if grace <= 0 {
		grace = alertmanager.RestartGrace
	}
	if up := time.Since(started); up < grace {
		return fmt.Errorf("alertmanager has been up %s, less than %s: an alert its senders have not sent again yet would read as resolved", up.Round(time.Second), grace)
	}
	return nil
}

package gate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"go.temporal.io/sdk/activity"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/fail"
	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/metrics"
)

// DriftApprovalAction is the approval context's action of a drift's
// RemediationApprovalRequest, and the gate's name for a drift decision write.
const DriftApprovalAction = "drift"

// DriftSubject is the decision a drift write records onto its parent.
type DriftSubject struct {
	// ApprovalRequest is the RemediationApprovalRequest, in the parent's
	// namespace, a person decided.
	ApprovalRequest string            `json:"approvalRequest"`
	Decision        v1alpha1.Decision `json:"decision"`
	// Child is the drifted object the decision names.
	Child v1alpha1.ObjectRef `json:"child"`
}

// verifyDrift re-reads what a drift decision write claims: the parent exists
// with the run's UID and this is its drift workflow (drift/<parent-uid>),
// and a RemediationApprovalRequest in the parent's own namespace, asked by
// this workflow about this parent and child, holds the decision being
// written. No person's grant is checked: the request's decider was
// authorized by the approval webhook. The write runs no catalog action, so
// only the protected-namespace rule applies.
func (g *Gate) verifyDrift(ctx context.Context, w Write) (authority, error) {
	s, t := w.Subject, w.Request.Target
	if s.Drift == nil || s.Namespace == "" {
		return authority{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, errors.New("a drift write must name its namespaced parent and the decision it records"))
	}
	if w.As != DriftServiceAccount || w.Request.Action != DriftApprovalAction {
		return authority{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("a drift decision is written as %s, not %s", DriftServiceAccount, w.As))
	}
	if t.Namespace != s.Namespace || t.Name != s.Name {
		return authority{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("a drift decision on %s/%s is written onto that parent, not %s", s.Namespace, s.Name, t.String()))
	}
	wfID := v1alpha1.DriftWorkflowID(s.UID)
	if err := g.Runs.Drift(ctx, s.UID); err != nil {
		return authority{}, err
	}
	parent := &unstructured.Unstructured{}
	parent.SetAPIVersion(t.APIVersion)
	parent.SetKind(t.Kind)
	if err := g.Subjects.Get(ctx, ctrlclient.ObjectKey{Namespace: s.Namespace, Name: s.Name}, parent); err != nil {
		return authority{}, fail.Classify(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("read drift parent %s: %w", t.String(), err))
	}
	if string(parent.GetUID()) != s.UID {
		return authority{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("drift parent %s has UID %s, not %s", t.String(), parent.GetUID(), s.UID))
	}
	var rar v1alpha1.RemediationApprovalRequest
	if err := g.Subjects.Get(ctx, ctrlclient.ObjectKey{Namespace: s.Namespace, Name: s.Drift.ApprovalRequest}, &rar); err != nil {
		return authority{}, fail.Classify(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("read the drift's approval request %s/%s: %w", s.Namespace, s.Drift.ApprovalRequest, err))
	}
	want := v1alpha1.ObjectRef{APIVersion: t.APIVersion, Kind: t.Kind, Namespace: s.Namespace, Name: s.Name}
	switch {
	case rar.Spec.WorkflowID != wfID || rar.Spec.SubjectRef != want || rar.Spec.ApprovalContext.Action != DriftApprovalAction:
		return authority{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("approval request %s/%s was not asked by %s about %s", s.Namespace, rar.Name, wfID, want.String()))
	case rar.Spec.ApprovalContext.Target != s.Drift.Child:
		return authority{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("approval request %s/%s is about %s, not %s", s.Namespace, rar.Name,
			rar.Spec.ApprovalContext.Target.String(), s.Drift.Child.String()))
	case s.Drift.Decision != v1alpha1.DecisionApproved && s.Drift.Decision != v1alpha1.DecisionRejected,
		rar.Status.Decision != s.Drift.Decision:
		return authority{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("approval request %s/%s is decided %q, so %q is not written",
			s.Namespace, rar.Name, rar.Status.Decision, s.Drift.Decision))
	}
	return authority{action: DriftApprovalAction, protectedOnly: true}, nil
}

// PassCallback is the gate of a callback, which writes to a receiver as
// surely as a patch writes to a parent: the workflow is the drift workflow
// of the report's parent, and url is configured for the parent's namespace
// now (the worker's flags, a Kausality policy's reporting). Only then does
// it hand out a Callback, which posts to that URL and no other.
func (g *Gate) PassCallback(ctx context.Context, parent kv1.DriftObjectReference, url string) (Callback, error) {
	err := g.checkCallback(ctx, parent, url)
	result := "passed"
	if err != nil {
		result = "refused"
		activity.GetLogger(ctx).Warn("callback refused by the gate", "parent", parent.Namespace+"/"+parent.Name, "url", url, "error", err)
	}
	metrics.GateDecisions.WithLabelValues(SubjectDrift, result).Inc()
	if err != nil {
		return Callback{}, err
	}
	return Callback{client: g.Callbacks, url: url}, nil
}

// Callback posts to the one URL the gate checked. Its fields are unexported
// and only PassCallback fills them.
type Callback struct {
	client *http.Client
	url    string
}

// Post sends body as JSON to the checked URL.
func (c Callback) Post(ctx context.Context, body []byte) (*http.Response, error) {
	if c.client == nil || c.url == "" {
		return nil, errors.New("callback refused: this callback was not handed out by the write gate")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, fail.Permanent(v1alpha1.ReasonInvalidParameters, fmt.Errorf("build request to %s: %w", c.url, err))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("post drift report to %s: %w", c.url, err)
	}
	return resp, nil
}

func (g *Gate) checkCallback(ctx context.Context, parent kv1.DriftObjectReference, url string) error {
	if err := g.Runs.Drift(ctx, parent.UID); err != nil {
		return err
	}
	s, err := g.Drift.Settings(ctx, parent.Namespace)
	if err != nil {
		return err
	}
	if !slices.Contains(s.CallbackURLs, url) {
		return fail.Permanent(v1alpha1.ReasonCallbackNotConfigured, fmt.Errorf("no --drift-callback-url or Kausality policy names %s for namespace %q", url, parent.Namespace))
	}
	return nil
}

// refuseProtected applies the protected-namespace rule alone, for a write
// the safety policy has no action to judge.
func (g *Gate) refuseProtected(ctx context.Context, w Write, req actions.Request) error {
	ns, err := g.Checks.namespace(ctx, req.Target.Namespace)
	if err != nil {
		return err
	}
	if v1alpha1.IsProtectedNamespace(ns) {
		return fail.Permanent(v1alpha1.ReasonProtectedNamespace, fmt.Errorf("%s onto %s refused at the write: %s", w.Subject.Kind, req.Target.String(), v1alpha1.ProtectedNamespaceMessage(req.Target.Namespace)))
	}
	activity.GetLogger(ctx).Info("write passed the gate", "subject", w.Subject.Kind, "object", w.Subject.Namespace+"/"+w.Subject.Name,
		"action", req.Action, "target", req.Target.String(), "as", w.As)
	return nil
}

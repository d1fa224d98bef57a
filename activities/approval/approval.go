package approval

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
)

// +kubebuilder:rbac:groups=remedy.dev,resources=remediationapprovalrequests,verbs=get;create;approve
// +kubebuilder:rbac:groups=remedy.dev,resources=remediationapprovalrequests/status,verbs=get;update
// +kubebuilder:rbac:groups=remedy.dev,resources=remediationrequests,verbs=get
// +kubebuilder:rbac:groups="",resources=configmaps,resourceNames=remedy-config,verbs=get

// ConfigMapName is the per-namespace ConfigMap whose approvalTimeout key sets
// the third level of the approval timeout hierarchy.
const ConfigMapName = "remedy-config"

// ConfigKeyApprovalTimeout is the key of ConfigMapName holding a Go duration.
const ConfigKeyApprovalTimeout = "approvalTimeout"

// Approvals creates RemediationApprovalRequests and records their decisions.
type Approvals struct {
	Client ctrlclient.Client
	// Runs binds the requests of reload, drift and alert runs to their open run.
	Runs *gate.OpenRuns
}

// NamespaceApprovalTimeout reads the namespace's remedy-config ConfigMap; 0
// means "not configured" and lets the default apply.
func (a *Approvals) NamespaceApprovalTimeout(ctx context.Context, namespace string) (time.Duration, error) {
	var cm corev1.ConfigMap
	err := a.Client.Get(ctx, ctrlclient.ObjectKey{Namespace: namespace, Name: ConfigMapName}, &cm)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read ConfigMap %s/%s: %w", namespace, ConfigMapName, err)
	}
	raw, ok := cm.Data[ConfigKeyApprovalTimeout]
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d <= 0 {
		// A typo must not block every approval in the namespace; the default applies.
		activity.GetLogger(ctx).Warn("ignoring invalid approvalTimeout", "namespace", namespace, "value", raw)
		return 0, nil
	}
	return d, nil
}

// ApprovalRequestInput is everything the request's immutable spec holds, plus its owner.
type ApprovalRequestInput struct {
	Namespace  string             `json:"namespace"`
	Name       string             `json:"name"`
	Subject    v1alpha1.ObjectRef `json:"subject"`
	SubjectUID string             `json:"subjectUID"`
	// RemediationRequest owns the approval when set (ADR-040's flat hierarchy).
	RemediationRequest string                   `json:"remediationRequest,omitempty"`
	WorkflowID         string                   `json:"workflowID"`
	Context            v1alpha1.ApprovalContext `json:"context"`
	RequiredBy         time.Time                `json:"requiredBy"`
	// TTLSecondsAfterFinished is the request's spec field (nil: unset).
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// CreateApprovalRequest creates the RAR owned by its RemediationRequest, or by
// its subject of any kind; a retry finds the one it created. Only Remedy's own
// subjects are marked controller and block their deletion: a workload or a
// drifted parent merely garbage-collects the request.
func (a *Approvals) CreateApprovalRequest(ctx context.Context, in ApprovalRequestInput) error {
	if err := gate.ApprovalRun(ctx, &gate.Subjects{Client: a.Client}, a.Runs, in.Namespace, in.Subject, in.WorkflowID); err != nil {
		return err
	}
	if in.Context.Action == gate.DriftApprovalAction {
		if err := a.verifyDriftAsk(ctx, in); err != nil {
			return err
		}
	}
	uid := types.UID(in.SubjectUID)
	if uid == "" {
		var err error
		if uid, err = a.subjectUID(ctx, in.Subject); err != nil {
			return err
		}
	}
	owner := metav1.OwnerReference{APIVersion: in.Subject.APIVersion, Kind: in.Subject.Kind, Name: in.Subject.Name, UID: uid}
	if owner.APIVersion == "" || owner.APIVersion == v1alpha1.GroupVersion.String() {
		owner.APIVersion, owner.Controller, owner.BlockOwnerDeletion = v1alpha1.GroupVersion.String(), ptr.To(true), ptr.To(true)
	}
	if in.RemediationRequest != "" {
		var rr v1alpha1.RemediationRequest
		if err := a.Client.Get(ctx, ctrlclient.ObjectKey{Namespace: in.Namespace, Name: in.RemediationRequest}, &rr); err != nil {
			return fail.Classify(v1alpha1.ReasonInvalidParameters, fmt.Errorf("read RemediationRequest %s: %w", in.RemediationRequest, err))
		}
		owner = metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RemediationRequest", Name: rr.Name, UID: rr.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	}
	rar := &v1alpha1.RemediationApprovalRequest{
		ObjectMeta: metav1.ObjectMeta{Name: in.Name, Namespace: in.Namespace, OwnerReferences: []metav1.OwnerReference{owner}},
		Spec: v1alpha1.RemediationApprovalRequestSpec{
			SubjectRef: in.Subject, WorkflowID: in.WorkflowID, ApprovalContext: in.Context,
			RequiredBy:              metav1.NewTime(in.RequiredBy),
			TTLSecondsAfterFinished: in.TTLSecondsAfterFinished,
		},
	}
	err := a.Client.Create(ctx, rar)
	if apierrors.IsAlreadyExists(err) {
		err = a.Client.Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar)
		// A retry finds its own request; anything else, even from an earlier
		// run of the same workflow ID, is a different question.
		if err == nil && (rar.Spec.WorkflowID != in.WorkflowID || !rar.Spec.RequiredBy.Time.Equal(in.RequiredBy) || rar.Spec.SubjectRef != in.Subject) {
			return fail.Permanent(v1alpha1.ReasonInvalidParameters, fmt.Errorf("RemediationApprovalRequest %s already exists for workflow %s, required by %s",
				in.Name, rar.Spec.WorkflowID, rar.Spec.RequiredBy.UTC().Format(time.RFC3339)))
		}
	}
	if err != nil {
		return fail.Classify(v1alpha1.ReasonInvalidParameters, fmt.Errorf("create approval request %s: %w", in.Name, err))
	}
	activity.GetLogger(ctx).Info("approval requested", "approvalRequest", in.Name, "workflowID", in.WorkflowID, "requiredBy", in.RequiredBy)
	return nil
}

// DecisionInput names the request a decision is for.
type DecisionInput struct {
	Namespace  string        `json:"namespace"`
	Name       string        `json:"name"`
	WorkflowID string        `json:"workflowID"`
	Decision   gate.Decision `json:"decision"`
}

// RecordDecision writes the workflow's decision to the RAR's status and
// returns the decision the RAR holds. Only the worker sets status.decision
// (the approval webhook turns a person's kubectl decision into
// status.requestedDecision for the operator to relay), so a decision already
// there is an earlier attempt of this record; returning it keeps the RAR and
// the workflow in agreement.
func (a *Approvals) RecordDecision(ctx context.Context, in DecisionInput) (gate.Decision, error) {
	var got gate.Decision
	var created time.Time
	var refused error
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var rar v1alpha1.RemediationApprovalRequest
		if err := a.Client.Get(ctx, ctrlclient.ObjectKey{Namespace: in.Namespace, Name: in.Name}, &rar); err != nil {
			return err
		}
		// Only the run that asked decides: a decision recorded by any other
		// run (a rogue one scheduling this activity) would be attributed to
		// whoever it names.
		if refused = gate.ApprovalRun(ctx, &gate.Subjects{Client: a.Client}, a.Runs, rar.Namespace, rar.Spec.SubjectRef, rar.Spec.WorkflowID); refused != nil {
			return nil
		}
		created = rar.CreationTimestamp.Time
		if rar.Status.Decision != "" {
			got = gate.Decision{Decision: rar.Status.Decision, DecidedBy: rar.Status.DecidedBy, Via: rar.Status.DecidedVia, Message: rar.Status.DecisionMessage}
			if rar.Status.DecidedAt != nil {
				got.At = rar.Status.DecidedAt.Time
			}
			return nil
		}
		d := in.Decision
		rar.Status.Decision, rar.Status.DecidedBy, rar.Status.DecidedVia = d.Decision, d.DecidedBy, d.Via
		rar.Status.DecidedAt, rar.Status.DecisionMessage, rar.Status.TimeRemaining = &metav1.Time{Time: d.At}, d.Message, ""
		got = d
		return a.Client.Status().Update(ctx, &rar)
	})
	if apierrors.IsForbidden(err) {
		// The worker's own grant on Remedy's own object: a refusal is the API
		// server's authorizer not ready yet (just restarted), or RBAC being
		// repaired, not a requester's mistake. Retried until requiredBy.
		return gate.Decision{}, fmt.Errorf("record decision on %s (retrying): %w", in.Name, err)
	}
	if err != nil {
		return gate.Decision{}, fail.Classify(v1alpha1.ReasonInvalidParameters, fmt.Errorf("record decision on %s: %w", in.Name, err))
	}
	if refused != nil {
		return gate.Decision{}, refused
	}
	metrics.ObserveApproval(string(got.Decision), string(got.Via), got.At.Sub(created))
	activity.GetLogger(ctx).Info("approval decision", "decision", got.Decision, "approver", got.DecidedBy,
		"via", got.Via, "workflowID", in.WorkflowID, "approvalRequest", in.Name, "message", got.Message)
	return got, nil
}

// verifyDriftAsk lets a drift workflow ask only about its own parent, in
// the parent's own namespace, and never in a protected one: a drift run can
// be started by anyone who reaches Temporal.
func (a *Approvals) verifyDriftAsk(ctx context.Context, in ApprovalRequestInput) error {
	if in.Subject.Namespace == "" || in.Namespace != in.Subject.Namespace {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("a drift's approval request goes into its parent's namespace %q, not %q", in.Subject.Namespace, in.Namespace))
	}
	if err := a.Runs.Drift(ctx, in.SubjectUID); err != nil {
		return err
	}
	if in.WorkflowID != v1alpha1.DriftWorkflowID(in.SubjectUID) {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("a drift's approval request names workflow %s, not %s", v1alpha1.DriftWorkflowID(in.SubjectUID), in.WorkflowID))
	}
	var ns corev1.Namespace
	if err := a.Client.Get(ctx, ctrlclient.ObjectKey{Name: in.Namespace}, &ns); err != nil {
		return fail.Classify(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("read namespace %s: %w", in.Namespace, err))
	}
	if v1alpha1.IsProtectedNamespace(&ns) {
		return fail.Permanent(v1alpha1.ReasonProtectedNamespace, fmt.Errorf("no drift approval request: %s", v1alpha1.ProtectedNamespaceMessage(in.Namespace)))
	}
	uid, err := a.subjectUID(ctx, in.Subject)
	if err != nil {
		return err
	}
	if string(uid) != in.SubjectUID {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("drift parent %s has UID %s, not %s", in.Subject.String(), uid, in.SubjectUID))
	}
	return nil
}

// subjectUID reads the subject's UID, for callers that know it only by name
// (a workload whose reload workflow outlives its recreation).
func (a *Approvals) subjectUID(ctx context.Context, ref v1alpha1.ObjectRef) (types.UID, error) {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(ref.APIVersion)
	obj.SetKind(ref.Kind)
	if err := a.Client.Get(ctx, ctrlclient.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj); err != nil {
		return "", fail.Classify(v1alpha1.ReasonInvalidParameters, fmt.Errorf("read approval subject %s: %w", ref.String(), err))
	}
	return obj.GetUID(), nil
}

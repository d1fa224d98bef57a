package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// +kubebuilder:rbac:groups=remedy.dev,resources=remediationrequests,verbs=get

// Subjects re-reads the object a workflow was started for. A workflow's input
// is whatever its starter sent, and anyone who can reach Temporal can start
// one: acting only when the object exists with that UID and spec makes a
// forged start do nothing.
type Subjects struct {
	Client ctrlclient.Reader
	// Seen, when set, keeps what the live reads found and answers the
	// checks a kept copy can answer (subject_seen.go); nil reads live.
	Seen *Seen
}

// SubjectRef names the object and what the workflow was told about it.
type SubjectRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// VerifyExecution requires the KubernetesExecution to exist with the UID and spec the workflow has.
// A copy this worker read or wrote answers when it shows the check passing
// (seenExecution); anything else is read live.
func (s *Subjects) VerifyExecution(ctx context.Context, ref SubjectRef, spec v1alpha1.KubernetesExecutionSpec) error {
	if _, ok := s.seenExecution(ctx, ref, &spec); ok {
		activity.GetLogger(ctx).Info("subject verified from the kept copy", "kind", "KubernetesExecution", "object", ref.Namespace+"/"+ref.Name, "uid", ref.UID)
		return nil
	}
	_, err := s.execution(ctx, ref, &spec)
	return err
}

// seenExecution is the check of execution answered from a kept copy
// (Seen): ok only when the copy shows the UID, the spec (when given), an
// unfinished object and the caller as its recorded run. Those but the phase
// never change once set, so a pass holds now; the phase may have moved on
// since the copy, which is why the write gate reads live.
func (s *Subjects) seenExecution(ctx context.Context, ref SubjectRef, spec *v1alpha1.KubernetesExecutionSpec) (*v1alpha1.KubernetesExecution, bool) {
	var k v1alpha1.KubernetesExecution
	if !s.Seen.Get(ref.UID, &k) || string(k.UID) != ref.UID || k.Status.Phase.Terminal() ||
		(spec != nil && !equality.Semantic.DeepEqual(k.Spec, *spec)) {
		return nil, false
	}
	want := fmt.Sprintf("kexec/%s/%s/%s", ref.Namespace, ref.Name, ref.UID)
	if !isRecordedRun(ctx, want, k.Status.WorkflowID, k.Status.RunID) {
		return nil, false
	}
	return &k, true
}

// seenRemediation is seenExecution for a RemediationRequest.
func (s *Subjects) seenRemediation(ctx context.Context, ref SubjectRef, spec *v1alpha1.RemediationRequestSpec) (*v1alpha1.RemediationRequest, bool) {
	var rr v1alpha1.RemediationRequest
	if !s.Seen.Get(ref.UID, &rr) || string(rr.UID) != ref.UID || rr.Status.Phase.Terminal() ||
		(spec != nil && !equality.Semantic.DeepEqual(rr.Spec, *spec)) {
		return nil, false
	}
	want := fmt.Sprintf("rr/%s/%s/%s", ref.Namespace, ref.Name, ref.UID)
	if !isRecordedRun(ctx, want, rr.Status.WorkflowID, rr.Status.RunID) {
		return nil, false
	}
	return &rr, true
}

// isRecordedRun reports whether the caller is want's recorded run: the
// positive case of ownRun, nothing else.
func isRecordedRun(ctx context.Context, want, workflowID, runID string) bool {
	caller := activity.GetInfo(ctx).WorkflowExecution
	return caller.ID == want && (workflowID == "" || workflowID == want) && runID != "" && caller.RunID == runID
}

// execution reads the KubernetesExecution and requires the UID and spec the
// run has, an unfinished object, and this run (ownRun): a start replayed
// with the UID and spec of an execution that finished long ago, under
// another ID, or in another run of the same ID, does nothing.
// A nil spec is not compared (a read bound to the run names no spec).
func (s *Subjects) execution(ctx context.Context, ref SubjectRef, spec *v1alpha1.KubernetesExecutionSpec) (*v1alpha1.KubernetesExecution, error) {
	var k v1alpha1.KubernetesExecution
	if err := s.getRecorded(ctx, ref, "KubernetesExecution", &k, func() bool { return k.Status.RunID != "" || k.Status.Phase.Terminal() }); err != nil {
		return nil, err
	}
	if err := s.compare(ctx, ref, "KubernetesExecution", string(k.UID), spec == nil || equality.Semantic.DeepEqual(k.Spec, *spec)); err != nil {
		return nil, err
	}
	run := ownRun{want: fmt.Sprintf("kexec/%s/%s/%s", ref.Namespace, ref.Name, ref.UID), workflowID: k.Status.WorkflowID, runID: k.Status.RunID}
	if err := s.ownRun(ctx, ref, "KubernetesExecution", run, k.Status.Phase, k.Status.Reason); err != nil {
		return nil, err
	}
	s.Seen.Put(&k)
	return &k, nil
}

// VerifyRemediation requires the RemediationRequest to exist with the UID and spec the workflow has.
func (s *Subjects) VerifyRemediation(ctx context.Context, ref SubjectRef, spec v1alpha1.RemediationRequestSpec) error {
	if _, ok := s.seenRemediation(ctx, ref, &spec); ok {
		activity.GetLogger(ctx).Info("subject verified from the kept copy", "kind", "RemediationRequest", "object", ref.Namespace+"/"+ref.Name, "uid", ref.UID)
		return nil
	}
	rr, err := s.remediation(ctx, ref)
	if err != nil {
		return err
	}
	return s.compare(ctx, ref, "RemediationRequest", string(rr.UID), equality.Semantic.DeepEqual(rr.Spec, spec))
}

// remediation reads the RemediationRequest and requires the UID the run has,
// an unfinished object, and this run (ownRun).
// RemediationOf is s.remediation for the remediation activities: a
// function, not a method, so that it registers no activity of Subjects.
func RemediationOf(ctx context.Context, s *Subjects, ref SubjectRef) (*v1alpha1.RemediationRequest, error) {
	return s.remediation(ctx, ref)
}

func (s *Subjects) remediation(ctx context.Context, ref SubjectRef) (*v1alpha1.RemediationRequest, error) {
	var rr v1alpha1.RemediationRequest
	if err := s.getRecorded(ctx, ref, "RemediationRequest", &rr, func() bool { return rr.Status.RunID != "" || rr.Status.Phase.Terminal() }); err != nil {
		return nil, err
	}
	if err := s.compare(ctx, ref, "RemediationRequest", string(rr.UID), true); err != nil {
		return nil, err
	}
	run := ownRun{want: fmt.Sprintf("rr/%s/%s/%s", ref.Namespace, ref.Name, ref.UID), workflowID: rr.Status.WorkflowID, runID: rr.Status.RunID}
	if err := s.ownRun(ctx, ref, "RemediationRequest", run, rr.Status.Phase, rr.Status.Reason); err != nil {
		return nil, err
	}
	s.Seen.Put(&rr)
	return &rr, nil
}

// approvalRun requires the caller to be the run an approval request is
// asked by or decided for: the workflow it names (workflowID) and, when its
// subject is a KubernetesExecution, that execution's recorded run. The
// subjects of reload, drift and alert approvals record no run (their
// workflows are started by signal-with-start and continue as new), so for
// them the caller must be the open run of the workflow ID, of its kind, on
// Remedy's task queue (OpenRuns).
// ApprovalRun is s.approvalRun for the approval activities: a function, not
// a method, so that it registers no activity of Subjects.
func ApprovalRun(ctx context.Context, s *Subjects, runs *OpenRuns, namespace string, subject v1alpha1.ObjectRef, workflowID string) error {
	return s.approvalRun(ctx, runs, namespace, subject, workflowID)
}

func (s *Subjects) approvalRun(ctx context.Context, runs *OpenRuns, namespace string, subject v1alpha1.ObjectRef, workflowID string) error {
	caller := activity.GetInfo(ctx).WorkflowExecution
	if caller.ID != workflowID {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("an approval request of workflow %s is asked and decided by that workflow only, not %s", workflowID, caller.ID))
	}
	if subject.Kind != "KubernetesExecution" || (subject.APIVersion != "" && subject.APIVersion != v1alpha1.GroupVersion.String()) {
		for prefix, workflowType := range map[string]string{"reload/": ReloadWorkflowType, "drift/": DriftWorkflowType, "alert/": AlertWorkflowType} {
			if strings.HasPrefix(workflowID, prefix) {
				return runs.callerIs(ctx, workflowID, workflowType)
			}
		}
		// Only execution, reload, drift and alert runs ask a person.
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("workflow %s asks and decides no approval request about %s %s", workflowID, subject.Kind, subject.Name))
	}
	ref := SubjectRef{Namespace: namespace, Name: subject.Name}
	var k v1alpha1.KubernetesExecution
	if err := s.get(ctx, ref, "KubernetesExecution", &k); err != nil {
		return err
	}
	ref.UID = string(k.UID)
	if k.Status.WorkflowID != caller.ID {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("KubernetesExecution %s/%s is run by workflow %s, not %s", namespace, subject.Name, k.Status.WorkflowID, caller.ID))
	}
	return CallerIsRun(caller.RunID, "KubernetesExecution", ref, k.Status.RunID)
}

// ownRun requires that the calling run is the object's own (run) and that
// the object has not finished.
//
// The caller is who Temporal's server says scheduled the activity
// (activity.GetInfo: the workflow ID and run ID of the scheduling run), not
// anything in the activity's input: an input can be copied from another
// run's history, a server-stamped run ID cannot. The workflow ID alone is not
// enough: once a run closes, anyone who reaches Temporal can start a new run
// under the same ID. So the object names its run: the operator records the run
// ID it started in status.runID (for a step, the one its request's run
// started, after checking that parent), and only that run passes.
//
// A run whose ID is not recorded yet (the operator records it right after the
// start, and backfills it for runs started before v0.2 by describing the
// open run of the deterministic ID) waits: the error is retryable.
func (s *Subjects) ownRun(ctx context.Context, ref SubjectRef, kind string, run ownRun, phase v1alpha1.Phase, reason string) error {
	caller := activity.GetInfo(ctx).WorkflowExecution
	if caller.ID != run.want || (run.workflowID != "" && run.workflowID != run.want) {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("%s %s/%s is run by workflow %s only, not %s", kind, ref.Namespace, ref.Name, run.want, caller.ID))
	}
	if phase.Terminal() {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("%s %s/%s already finished (%s, %s): a finished %s never runs again",
			kind, ref.Namespace, ref.Name, phase, reason, kind))
	}
	return CallerIsRun(caller.RunID, kind, ref, run.runID)
}

// ownRun is what an object's status says about its run.
type ownRun struct {
	// want is the object's deterministic workflow ID; workflowID and runID
	// are what the status recorded.
	want, workflowID, runID string
}

// CallerIsRun requires the calling run to be the recorded one; an
// unrecorded run is retried (ErrRunNotRecorded), never taken on trust.
func CallerIsRun(caller, kind string, ref SubjectRef, recorded string) error {
	if recorded == "" {
		return fmt.Errorf("%s %s/%s: %w", kind, ref.Namespace, ref.Name, ErrRunNotRecorded)
	}
	if caller != recorded {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("%s %s/%s is run by run %s of its workflow only, not run %s: a payload from another run, or a run started later under its workflow ID, acts for nobody",
			kind, ref.Namespace, ref.Name, recorded, caller))
	}
	return nil
}

// ErrRunNotRecorded: the object's run ID is not recorded yet; the caller
// retries until the operator records it.
var ErrRunNotRecorded = errors.New("its run ID is not recorded yet (status.runID); retrying until the operator records it")

// RunRecordWait is how long a check waits in place for the operator to
// record a run it just started, before it fails retryably: the run's first
// check usually races the operator's status write by milliseconds. A
// variable only so that tests can shorten it.
var RunRecordWait = 3 * time.Second

// getRecorded reads obj, and reads it again, backing off, while it is this
// object (ref's UID) and recorded says its run is not recorded yet.
func (s *Subjects) getRecorded(ctx context.Context, ref SubjectRef, kind string, obj ctrlclient.Object, recorded func() bool) error {
	wait, deadline := 25*time.Millisecond, time.Now().Add(RunRecordWait)
	for {
		if err := s.get(ctx, ref, kind, obj); err != nil {
			return err
		}
		if string(obj.GetUID()) != ref.UID || recorded() || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the run of %s %s/%s to be recorded: %w", kind, ref.Namespace, ref.Name, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

func (s *Subjects) get(ctx context.Context, ref SubjectRef, kind string, obj ctrlclient.Object) error {
	err := s.Client.Get(ctx, ctrlclient.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj)
	if apierrors.IsNotFound(err) {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("%s %s/%s does not exist: this run was not started for a live object, so it does nothing", kind, ref.Namespace, ref.Name))
	}
	if err != nil {
		return fmt.Errorf("read %s %s/%s: %w", kind, ref.Namespace, ref.Name, err)
	}
	return nil
}

func (s *Subjects) compare(ctx context.Context, ref SubjectRef, kind, uid string, sameSpec bool) error {
	switch {
	case uid != ref.UID:
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("%s %s/%s has UID %s, but this run was started for UID %s", kind, ref.Namespace, ref.Name, uid, ref.UID))
	case !sameSpec:
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("the spec this run was started with is not the spec of %s %s/%s", kind, ref.Namespace, ref.Name))
	}
	activity.GetLogger(ctx).Info("subject verified", "kind", kind, "object", ref.Namespace+"/"+ref.Name, "uid", uid)
	return nil
}

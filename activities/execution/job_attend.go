package execution

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

// attendance is a RunJob attempt answering its Job's Pod through the exec
// gate, while it watches the Job.
type attendance struct {
	asks    <-chan podAsk
	release func()
	answer  func(podAsk) error
	// refused is the gate's last refusal: the run's error once the Pod has
	// exited on it.
	refused error
}

// attend makes this attempt the one that answers job's Pod on this worker.
func (j *Jobs) attend(ctx context.Context, in JobInput, job *batchv1.Job) *attendance {
	asks, release := j.ExecGate.attend(job.UID)
	return &attendance{asks: asks, release: release, answer: func(a podAsk) error { return j.answer(ctx, in, a) }}
}

// handle answers one ask, in the attempt's own activity context: the write
// gate checks the subject the run was started for, as the run.
func (a *attendance) handle(ctx context.Context, ask podAsk) {
	err := a.answer(ask)
	if err != nil {
		a.refused = err
	}
	activity.GetLogger(ctx).Info("exec gate answered", "pod", ask.pod, "passed", err == nil, "error", err)
	ask.answer <- err
}

// answer checks that the Pod asks for exactly the write its Job was created
// for, as the account it was created with, and asks the write gate about
// that write: the Job's, taken from the run's input, never from the Pod.
func (j *Jobs) answer(ctx context.Context, in JobInput, ask podAsk) error {
	if want := actions.ServiceAccountName(in.Request.Action); ask.account != want {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("Pod %s asks as %s; its Job writes as %s", ask.pod, ask.account, want))
	}
	asked, err1 := json.Marshal(ask.request)
	want, err2 := json.Marshal(in.Request)
	if err := errors.Join(err1, err2); err != nil || !bytes.Equal(asked, want) {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("Pod %s asks to write %s, not the write its Job was created for (%s)", ask.pod, asked, want))
	}
	return j.Gate.Check(ctx, in.write())
}

// runCanceled tells the run's cancellation (its workflow canceled, as the
// operator does when the execution is deleted, or gone) from the worker
// stopping, after which a retry on another worker resumes the Job.
func runCanceled(ctx context.Context) bool {
	cause := context.Cause(ctx)
	var canceled *temporal.CanceledError
	var gone *serviceerror.NotFound
	return errors.As(cause, &canceled) || errors.As(cause, &gone)
}

// remove deletes the Job of a canceled run, and with it its Pod, so nothing
// is left armed to write.
func (j *Jobs) remove(ctx context.Context, job *batchv1.Job) {
	log := activity.GetLogger(ctx)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := j.Client.BatchV1().Jobs(j.Namespace).Delete(dctx, job.Name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &job.UID},
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	})
	if err != nil && !apierrors.IsNotFound(err) {
		log.Error("delete the Job of a canceled run", "job", job.Name, "error", err)
		return
	}
	log.Info("run canceled: Job deleted", "job", job.Name, "uid", job.UID)
}

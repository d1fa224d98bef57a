package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

// wait watches the Job until it finishes, heartbeating on every event and on a
// ticker, so a dead worker is noticed and a retry resumes here, and answers
// its Pod's ask of the exec gate. A canceled run deletes its Job.
func (j *Jobs) wait(ctx context.Context, job *batchv1.Job, b *beater, att *attendance) (*batchv1.Job, error) {
	job, err := j.watch(ctx, job, b, att)
	if err != nil && ctx.Err() != nil && runCanceled(ctx) {
		j.remove(ctx, job)
	}
	return job, err
}

func (j *Jobs) watch(ctx context.Context, job *batchv1.Job, b *beater, att *attendance) (*batchv1.Job, error) {
	jobs := j.Client.BatchV1().Jobs(j.Namespace)
	every := j.HeartbeatEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	name := job.Name
	for !finished(job) {
		b.beat()
		w, err := jobs.Watch(ctx, metav1.ListOptions{
			FieldSelector:       fields.OneTermEqualSelector("metadata.name", job.Name).String(),
			ResourceVersion:     job.ResourceVersion,
			AllowWatchBookmarks: true,
		})
		if err != nil {
			return job, fmt.Errorf("watch job %s: %w", name, err)
		}
		next, err := follow(ctx, w, job, tick.C, b, att)
		w.Stop()
		if err != nil {
			return job, err
		}
		job = next
		if !finished(job) {
			// The watch ended (server timeout, expired resourceVersion): start
			// again from a fresh read rather than from a stale version.
			next, err := jobs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return job, fmt.Errorf("get job %s: %w", name, err)
			}
			job = next
		}
	}
	return job, nil
}

func follow(ctx context.Context, w watch.Interface, job *batchv1.Job, tick <-chan time.Time, b *beater, att *attendance) (*batchv1.Job, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case ask := <-att.asks:
			att.handle(ctx, ask)
		case <-tick:
			b.beat()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return job, nil
			}
			b.beat()
			switch ev.Type {
			case watch.Deleted:
				return nil, fmt.Errorf("job %s was deleted before it finished", job.Name)
			case watch.Error:
				return job, nil
			case watch.Added, watch.Modified:
				if next, ok := ev.Object.(*batchv1.Job); ok {
					job = next
				}
			}
			if finished(job) {
				return job, nil
			}
		}
	}
}

// finished also accepts the interim conditions: the Job's outcome is already
// decided, the controller only waits for pods to terminate before writing
// Complete or Failed.
func finished(job *batchv1.Job) bool { return condition(job) != nil }

// succeeded says a finished Job's Pod completed.
func succeeded(job *batchv1.Job) bool {
	c := condition(job)
	return c != nil && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobSuccessCriteriaMet)
}

func condition(job *batchv1.Job) *batchv1.JobCondition {
	for _, t := range []batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobFailed, batchv1.JobSuccessCriteriaMet, batchv1.JobFailureTarget} {
		for i, c := range job.Status.Conditions {
			if c.Type == t && c.Status == corev1.ConditionTrue {
				return &job.Status.Conditions[i]
			}
		}
	}
	return nil
}

func (j *Jobs) result(ctx context.Context, job *batchv1.Job) (ExecuteResult, error) {
	log := activity.GetLogger(ctx)
	pods, err := j.Client.CoreV1().Pods(j.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: "job-name=" + job.Name + ",controller-uid=" + string(job.UID),
	})
	if err != nil {
		return ExecuteResult{}, fail.Classify(v1alpha1.ReasonExecutionFailed, fmt.Errorf("list pods of job %s: %w", job.Name, err))
	}
	c := condition(job)
	done := succeeded(job)
	phase := corev1.PodFailed
	if done {
		phase = corev1.PodSucceeded
	}
	pod, msg := lastTerminated(pods.Items, phase)
	// Without a kubelet (or once the node is gone) there are no logs; they are a bonus.
	logs := j.logs(ctx, pod)
	if logs != "" {
		log.Info("job pod logs", "job", job.Name, "pod", pod.Name, "logs", logs)
	}
	switch {
	case done:
		var plan actions.Plan
		if err := json.Unmarshal([]byte(msg), &plan); err != nil {
			return ExecuteResult{}, fail.Permanent(v1alpha1.ReasonExecutionFailed, fmt.Errorf("job %s succeeded but left no plan in its termination message (%q): %w", job.Name, msg, err))
		}
		log.Info("job completed", "job", job.Name, "noOp", plan.NoOp, "after", plan.Change.After, "failedPods", job.Status.Failed)
		return ExecuteResult{Plan: plan, Retries: job.Status.Failed, JobName: job.Name, Logs: logs}, nil
	case c.Reason == batchv1.JobReasonDeadlineExceeded:
		return ExecuteResult{}, fail.Permanent(v1alpha1.ReasonExecutionTimeout, fmt.Errorf("job %s ran longer than its %ds deadline", job.Name, ptr.Deref(job.Spec.ActiveDeadlineSeconds, 0)))
	default:
		if msg == "" {
			msg = fmt.Sprintf("job %s failed: %s: %s", job.Name, c.Reason, c.Message)
		}
		// The message is the Pod's write's failure, as the API server wrote it.
		return ExecuteResult{}, gate.WithAPIText(fail.Permanent(v1alpha1.ReasonExecutionFailed, errors.New(msg)), gate.APIText{Reason: c.Reason})
	}
}

// lastTerminated returns the pod in phase that finished last, and its exec container's message.
func lastTerminated(pods []corev1.Pod, phase corev1.PodPhase) (*corev1.Pod, string) {
	var last *corev1.Pod
	var msg string
	var at time.Time
	for i := range pods {
		if pods[i].Status.Phase != phase {
			continue
		}
		for _, cs := range pods[i].Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && cs.Name == "exec" && (last == nil || !t.FinishedAt.Time.Before(at)) {
				last, msg, at = &pods[i], strings.TrimSpace(t.Message), t.FinishedAt.Time
			}
		}
	}
	return last, msg
}

func (j *Jobs) logs(ctx context.Context, pod *corev1.Pod) string {
	if pod == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	raw, err := j.Client.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
		Container: "exec", LimitBytes: ptr.To[int64](maxTerminationMessage),
	}).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return string(raw)
}

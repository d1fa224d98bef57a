package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/activities/actions"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// +kubebuilder:rbac:groups=batch,namespace=remedy-system,resources=jobs,verbs=create;get;list;watch;delete
// +kubebuilder:rbac:groups="",namespace=remedy-system,resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=remedy-system,resources=pods/log,verbs=get

// Labels of executor Jobs. They stand in for an owner reference: a pod can only
// use a ServiceAccount of its own namespace, so Jobs run beside the action
// accounts, and owner references cannot point across namespaces.
const (
	LabelPartOf             = "app.kubernetes.io/part-of"
	LabelAction             = "remedy.dev/action"
	LabelExecutionName      = "remedy.dev/execution-name"
	LabelExecutionNamespace = "remedy.dev/execution-namespace"
	LabelExecutionUID       = "remedy.dev/execution-uid"
)

// RequestEnv carries the actions.Request as JSON into `remedy exec`.
const RequestEnv = "REMEDY_REQUEST"

// maxTerminationMessage is what the kubelet keeps of a termination log.
const maxTerminationMessage = 4096

// Jobs runs actions in batch/v1 Jobs as the action's own ServiceAccount: the
// `job` executor.
type Jobs struct {
	// Client is the worker's own identity; it manages Jobs, it never touches targets.
	Client kubernetes.Interface
	// Namespace holds the Jobs and the remedy-action-<action> ServiceAccounts.
	Namespace string
	// Image runs `remedy exec`.
	Image string
	// HeartbeatEvery bounds the silence between heartbeats while a Job runs (default 5s).
	HeartbeatEvery time.Duration
}

// JobInput is one execution's action, to run in a Job.
type JobInput struct {
	ExecutionNamespace string          `json:"executionNamespace"`
	ExecutionName      string          `json:"executionName"`
	ExecutionUID       string          `json:"executionUID"`
	Request            actions.Request `json:"request"`
	Timeout            time.Duration   `json:"timeout"`
	MaxRetries         int32           `json:"maxRetries"`
}

// JobName is deterministic so a retried activity finds the Job its earlier
// attempt created. It hashes the request too: a rollback in the same
// execution is a different Job, a retry of the same request is not.
func JobName(in JobInput) string {
	req, _ := json.Marshal(in.Request)
	sum := sha256.Sum256(append([]byte(in.ExecutionUID+"/"), req...))
	action := in.Request.Action
	if len(action) > 40 {
		action = strings.TrimRight(action[:40], "-")
	}
	return "remedy-" + action + "-" + hex.EncodeToString(sum[:])[:10]
}

// RunJob creates (or finds again) the execution's Job, watches it to the end
// and returns the plan the pod wrote to its termination message.
func (j *Jobs) RunJob(ctx context.Context, in JobInput) (ExecuteResult, error) {
	if _, err := actions.Validate(in.Request); err != nil {
		return ExecuteResult{}, classify(ReasonInvalidParameters, err)
	}
	job, err := j.ensure(ctx, in)
	if err != nil {
		return ExecuteResult{}, classify(ReasonExecutionFailed, err)
	}
	if job, err = j.wait(ctx, job); err != nil {
		return ExecuteResult{}, classify(ReasonExecutionFailed, err)
	}
	return j.result(ctx, job)
}

func (j *Jobs) ensure(ctx context.Context, in JobInput) (*batchv1.Job, error) {
	want, err := j.job(in)
	if err != nil {
		return nil, err
	}
	jobs := j.Client.BatchV1().Jobs(j.Namespace)
	job, err := jobs.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if job, err = jobs.Create(ctx, want, metav1.CreateOptions{FieldManager: actions.FieldManager}); apierrors.IsAlreadyExists(err) {
			job, err = jobs.Get(ctx, want.Name, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("get or create job %s: %w", want.Name, err)
	}
	if uid := job.Labels[LabelExecutionUID]; uid != in.ExecutionUID {
		return nil, permanent(ReasonExecutionFailed, fmt.Errorf("job %s/%s belongs to execution %s, not %s", j.Namespace, job.Name, uid, in.ExecutionUID))
	}
	activity.GetLogger(ctx).Info("watching job", "job", job.Name, "namespace", j.Namespace, "attempt", activity.GetInfo(ctx).Attempt)
	return job, nil
}

func (j *Jobs) job(in JobInput) (*batchv1.Job, error) {
	req, err := json.Marshal(in.Request)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	timeout := in.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	labels := map[string]string{
		LabelPartOf:             "remedy",
		LabelAction:             in.Request.Action,
		LabelExecutionName:      labelValue(in.ExecutionName),
		LabelExecutionNamespace: in.ExecutionNamespace,
		LabelExecutionUID:       in.ExecutionUID,
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: JobName(in), Namespace: j.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To(in.MaxRetries),
			ActiveDeadlineSeconds:   ptr.To(int64(math.Ceil(timeout.Seconds()))),
			TTLSecondsAfterFinished: ptr.To[int32](300),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: actions.ServiceAccountName(in.Request.Action),
					// The mounted token is the action's identity: nothing else authorizes the write.
					AutomountServiceAccountToken: ptr.To(true),
					RestartPolicy:                corev1.RestartPolicyNever,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](65532),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:    "exec",
						Image:   j.image(),
						Command: []string{"/remedy", "exec"},
						Env:     []corev1.EnvVar{{Name: RequestEnv, Value: string(req)}},
						// A crash before the plan is written still leaves a message.
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
						},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				},
			},
		},
	}
	if in.ExecutionNamespace == j.Namespace {
		job.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: "KubernetesExecution",
			Name: in.ExecutionName, UID: types.UID(in.ExecutionUID),
		}}
	}
	return job, nil
}

func (j *Jobs) image() string {
	if j.Image == "" {
		return "ghcr.io/remedy-dev/remedy:latest"
	}
	return j.Image
}

// wait watches the Job until it finishes, heartbeating on every event and on a
// ticker, so a dead worker is noticed and a retry resumes here.
func (j *Jobs) wait(ctx context.Context, job *batchv1.Job) (*batchv1.Job, error) {
	jobs := j.Client.BatchV1().Jobs(j.Namespace)
	every := j.HeartbeatEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	name := job.Name
	for !finished(job) {
		activity.RecordHeartbeat(ctx, name)
		w, err := jobs.Watch(ctx, metav1.ListOptions{
			FieldSelector:       fields.OneTermEqualSelector("metadata.name", job.Name).String(),
			ResourceVersion:     job.ResourceVersion,
			AllowWatchBookmarks: true,
		})
		if err != nil {
			return nil, fmt.Errorf("watch job %s: %w", name, err)
		}
		job, err = follow(ctx, w, job, tick.C)
		w.Stop()
		if err != nil {
			return nil, err
		}
		if !finished(job) {
			// The watch ended (server timeout, expired resourceVersion): start
			// again from a fresh read rather than from a stale version.
			if job, err = jobs.Get(ctx, name, metav1.GetOptions{}); err != nil {
				return nil, fmt.Errorf("get job %s: %w", name, err)
			}
		}
	}
	return job, nil
}

func follow(ctx context.Context, w watch.Interface, job *batchv1.Job, tick <-chan time.Time) (*batchv1.Job, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick:
			activity.RecordHeartbeat(ctx, job.Name)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return job, nil
			}
			activity.RecordHeartbeat(ctx, job.Name)
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
		return ExecuteResult{}, classify(ReasonExecutionFailed, fmt.Errorf("list pods of job %s: %w", job.Name, err))
	}
	c := condition(job)
	succeeded := c.Type == batchv1.JobComplete || c.Type == batchv1.JobSuccessCriteriaMet
	phase := corev1.PodFailed
	if succeeded {
		phase = corev1.PodSucceeded
	}
	pod, msg := lastTerminated(pods.Items, phase)
	// Without a kubelet (or once the node is gone) there are no logs; they are a bonus.
	logs := j.logs(ctx, pod)
	if logs != "" {
		log.Info("job pod logs", "job", job.Name, "pod", pod.Name, "logs", logs)
	}
	switch {
	case succeeded:
		var plan actions.Plan
		if err := json.Unmarshal([]byte(msg), &plan); err != nil {
			return ExecuteResult{}, permanent(ReasonExecutionFailed, fmt.Errorf("job %s succeeded but left no plan in its termination message (%q): %w", job.Name, msg, err))
		}
		log.Info("job completed", "job", job.Name, "noOp", plan.NoOp, "after", plan.Change.After, "failedPods", job.Status.Failed)
		return ExecuteResult{Plan: plan, Retries: job.Status.Failed, JobName: job.Name, Logs: logs}, nil
	case c.Reason == batchv1.JobReasonDeadlineExceeded:
		return ExecuteResult{}, permanent(ReasonExecutionTimeout, fmt.Errorf("job %s ran longer than its %ds deadline", job.Name, ptr.Deref(job.Spec.ActiveDeadlineSeconds, 0)))
	default:
		if msg == "" {
			msg = fmt.Sprintf("job %s failed: %s: %s", job.Name, c.Reason, c.Message)
		}
		return ExecuteResult{}, permanent(ReasonExecutionFailed, errors.New(msg))
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

// labelValue keeps long execution names within a label value's 63 characters.
func labelValue(s string) string {
	if len(s) <= 63 {
		return s
	}
	return strings.TrimRight(s[:63], "-.")
}

// ExecRequest is the body of `remedy exec`: it applies the request with the
// caller's identity (the pod's ServiceAccount) and writes the plan's JSON, or
// the error, to the termination log that RunJob reads.
func ExecRequest(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, request []byte, terminationLog string) (actions.Plan, error) {
	var req actions.Request
	if err := json.Unmarshal(request, &req); err != nil {
		err = fmt.Errorf("decode request: %w", err)
		return actions.Plan{}, errors.Join(err, writeTermination(terminationLog, err.Error()))
	}
	// The plan pins the resourceVersion it was made from, so a controller's
	// concurrent write conflicts; re-reading and re-planning is cheaper than
	// failing the pod and waiting out the Job's backoff.
	var plan actions.Plan
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() (err error) {
		plan, err = actions.Run(ctx, dyn, mapper, req, actions.Apply)
		return err
	})
	if err != nil {
		err = fmt.Errorf("%s %s: %w", req.Action, req.Target.String(), err)
		return plan, errors.Join(err, writeTermination(terminationLog, err.Error()))
	}
	out, err := json.Marshal(plan)
	if err == nil && len(out) > maxTerminationMessage {
		// The patch is already applied and the rest of the plan is what
		// callers need; drop it rather than let the kubelet cut the JSON.
		trimmed := plan
		trimmed.Patch = ""
		out, err = json.Marshal(trimmed)
	}
	if err != nil {
		return plan, fmt.Errorf("encode plan: %w", err)
	}
	return plan, writeTermination(terminationLog, string(out))
}

func writeTermination(path, msg string) error {
	if len(msg) > maxTerminationMessage {
		msg = msg[:maxTerminationMessage]
	}
	if err := os.WriteFile(path, []byte(msg), 0o644); err != nil {
		return fmt.Errorf("write termination log %s: %w", path, err)
	}
	return nil
}

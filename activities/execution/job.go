package execution

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/release"
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

// DefaultJobTTL is how long a finished Job stays for a worker to read its result.
const DefaultJobTTL = 300 * time.Second

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
	// Heartbeats records the Job's UID and result with the server at once
	// (see Execution.Heartbeats); nil leaves only the throttled heartbeat.
	Heartbeats Heartbeater
	// TTL is the Jobs' ttlSecondsAfterFinished, whole seconds (default DefaultJobTTL).
	TTL time.Duration
	// Gate is asked right before the Job is created, and again when the
	// Job's Pod asks through ExecGate, immediately before its write.
	Gate WriteChecker
	// ExecGate carries the Pod's ask to the attempt that watches its Job;
	// without one (or its URL) no Job is created.
	ExecGate *ExecGate
}

// WriteChecker is the write gate as the job executor asks it: the Job is
// the worker's own object, its pod's write is the action's.
type WriteChecker interface {
	Check(ctx context.Context, w gate.Write) error
}

func (j *Jobs) ttl() int32 {
	if j.TTL <= 0 {
		return int32(DefaultJobTTL.Seconds())
	}
	return int32(math.Ceil(j.TTL.Seconds()))
}

// jobProgress is what a RunJob attempt leaves in its heartbeat for the next:
// the Job it created, and the result once read. The Job is deleted a while
// after it finishes (its TTL); a retry after that must neither create it
// again, which would run the action twice, nor lose a result already read.
type jobProgress struct {
	Name   string         `json:"name"`
	UID    types.UID      `json:"uid"`
	Result *ExecuteResult `json:"result,omitempty"`
}

// JobInput is one execution's action, to run in a Job.
type JobInput struct {
	ExecutionNamespace string          `json:"executionNamespace"`
	ExecutionName      string          `json:"executionName"`
	ExecutionUID       string          `json:"executionUID"`
	Request            actions.Request `json:"request"`
	// Execution is the spec the run was started with, for the write gate.
	Execution v1alpha1.KubernetesExecutionSpec `json:"execution"`
	Timeout   time.Duration                    `json:"timeout"`
	// MaxRetries is no longer used: the Job's Pod is never retried by the
	// Job controller (backoffLimit 0), so each write is one ask of the gate.
	// Kept so runs started before still decode.
	MaxRetries int32 `json:"maxRetries"`
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
		return ExecuteResult{}, fail.Classify(v1alpha1.ReasonInvalidParameters, err)
	}
	if j.ExecGate == nil || j.ExecGate.URL == "" {
		return ExecuteResult{}, fail.Permanent(v1alpha1.ReasonExecutionFailed, errors.New("the job executor has no exec gate (worker --exec-gate-url): "+
			"its Pod would have no one to ask immediately before its write, so no Job is created"))
	}
	b := newBeater(ctx, j.Heartbeats)
	var prior jobProgress
	if activity.HasHeartbeatDetails(ctx) && activity.GetHeartbeatDetails(ctx, &prior) == nil && prior.UID != "" {
		if prior.Result != nil {
			activity.GetLogger(ctx).Info("job result read by an earlier attempt", "job", prior.Name, "uid", prior.UID)
			return *prior.Result, nil
		}
		b.set(prior)
	}
	job, err := j.ensure(ctx, in, prior, b)
	if err != nil {
		return ExecuteResult{}, fail.Classify(v1alpha1.ReasonExecutionFailed, err)
	}
	att := j.attend(ctx, in, job)
	defer att.release()
	if job, err = j.wait(ctx, job, b, att); err != nil {
		return ExecuteResult{}, fail.Classify(v1alpha1.ReasonExecutionFailed, err)
	}
	if att.refused != nil && !succeeded(job) {
		// The Pod exited on the gate's refusal: the run fails with the gate's reason.
		return ExecuteResult{}, att.refused
	}
	res, err := j.result(ctx, job)
	if err == nil {
		// A worker dying now, and down past the TTL, leaves the next attempt this.
		err = b.record(jobProgress{Name: job.Name, UID: job.UID, Result: &res})
	}
	return res, err
}

// ensure creates the Job, or finds again the one prior names. A Job that
// prior names and that is gone was collected with its result unread: the
// action ran, or may have, so it is not created again.
func (j *Jobs) ensure(ctx context.Context, in JobInput, prior jobProgress, b *beater) (*batchv1.Job, error) {
	want, err := j.job(in)
	if err != nil {
		return nil, err
	}
	jobs := j.Client.BatchV1().Jobs(j.Namespace)
	job, err := jobs.Get(ctx, want.Name, metav1.GetOptions{})
	if prior.UID != "" && (apierrors.IsNotFound(err) || err == nil && job.UID != prior.UID) {
		return nil, fail.Permanent(v1alpha1.ReasonExecutionFailed, fmt.Errorf("job %s/%s (uid %s) was deleted before its result was read, "+
			"likely by its %ds TTL while no worker watched it; it is not run again: check the target", j.Namespace, prior.Name, prior.UID, j.ttl()))
	}
	if apierrors.IsNotFound(err) {
		if err := j.Gate.Check(ctx, in.write()); err != nil {
			return nil, err
		}
		if job, err = jobs.Create(ctx, want, metav1.CreateOptions{FieldManager: actions.FieldManager}); apierrors.IsAlreadyExists(err) {
			job, err = jobs.Get(ctx, want.Name, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("get or create job %s: %w", want.Name, err)
	}
	if uid := job.Labels[LabelExecutionUID]; uid != in.ExecutionUID {
		return nil, fail.Permanent(v1alpha1.ReasonExecutionFailed, fmt.Errorf("job %s/%s belongs to execution %s, not %s", j.Namespace, job.Name, uid, in.ExecutionUID))
	}
	if prior.UID == "" {
		if err := b.record(jobProgress{Name: job.Name, UID: job.UID}); err != nil {
			return nil, err
		}
	}
	activity.GetLogger(ctx).Info("watching job", "job", job.Name, "uid", job.UID, "namespace", j.Namespace, "attempt", activity.GetInfo(ctx).Attempt)
	return job, nil
}

// write is the Job's action as the write gate sees it.
func (in JobInput) write() gate.Write {
	spec := in.Execution
	return gate.Write{
		Subject: gate.Subject{Kind: gate.SubjectExecution, Namespace: in.ExecutionNamespace, Name: in.ExecutionName, UID: in.ExecutionUID, Execution: &spec},
		Request: in.Request,
		As:      actions.ServiceAccountName(in.Request.Action),
	}
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
			// One Pod, one ask of the gate, one write: the Job controller
			// never starts another Pod behind the gate's back.
			BackoffLimit:            ptr.To[int32](0),
			ActiveDeadlineSeconds:   ptr.To(int64(math.Ceil(timeout.Seconds()))),
			TTLSecondsAfterFinished: ptr.To(j.ttl()),
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
					// The token the Pod asks the exec gate with: bound to the Pod, and
					// to an audience the API server accepts for nothing else.
					Volumes: []corev1.Volume{{Name: "exec-gate", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
						Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
							Audience: ExecGateAudience, ExpirationSeconds: ptr.To[int64](execGateTokenSeconds), Path: "token"}}},
					}}}},
					Containers: []corev1.Container{{
						Name:    "exec",
						Image:   j.image(),
						Command: []string{"/remedy", "exec"},
						Env: []corev1.EnvVar{{Name: RequestEnv, Value: string(req)},
							{Name: ExecGateURLEnv, Value: j.ExecGate.URL}, {Name: ExecGateCAEnv, Value: j.ExecGate.CA}},
						VolumeMounts: []corev1.VolumeMount{{Name: "exec-gate", MountPath: ExecGateTokenDir, ReadOnly: true}},
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
		return release.Image()
	}
	return j.Image
}

// labelValue keeps long execution names within a label value's 63 characters.
func labelValue(s string) string {
	if len(s) <= 63 {
		return s
	}
	return strings.TrimRight(s[:63], "-.")
}

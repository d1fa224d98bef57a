package reload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/internal/reloadrule"
)

// RestartInput is one restart intent: the workload, the changes it must
// carry and the restartedAt token, fixed per intent so retries are idempotent.
type RestartInput struct {
	Namespace   string                    `json:"namespace"`
	Kind        string                    `json:"kind"`
	Name        string                    `json:"name"`
	Scope       string                    `json:"scope"`
	Changes     []reloadrule.ConfigChange `json:"changes"`
	RestartedAt string                    `json:"restartedAt"`
	// Coalesced counts the changes folded into this restart beyond the first.
	Coalesced int `json:"coalesced,omitempty"`
	// Policy names the ConfigReloadPolicy the run was started for.
	Policy string `json:"policy,omitempty"`
	// ApprovalRequest names the approved RemediationApprovalRequest, when
	// the restart was put to a person; the write gate re-reads it.
	ApprovalRequest string `json:"approvalRequest,omitempty"`
}

// RestartResult says whether the pod template changed.
type RestartResult struct {
	Restarted bool `json:"restarted"`
}

// Reload holds the activities of the reload workflow. It reads workloads
// as the remedy-reload ServiceAccount (ReloadServiceAccount, impersonated,
// read-only) and writes them only with the client the write gate hands out
// for one restart: the worker's own role cannot write workloads.
type Reload struct {
	// Gate re-checks each write and hands out remedy-reload's writing client.
	Gate *gate.Gate
	// Events records Events on workloads, as the worker: refusals too, which get no writer.
	Events kubernetes.Interface
	// Namespaces reads namespace labels, as the worker, for the protected-namespace rule.
	Namespaces kubernetes.Interface
}

var workloadResources = map[string]string{"Deployment": "deployments", "StatefulSet": "statefulsets", "DaemonSet": "daemonsets"}

// RestartWorkload rolls the workload by patching its pod template's
// restartedAt and config-hash annotations, and records the same hashes as the
// metadata baseline. A workload whose pod template already carries every
// hash is current: only a missing baseline is written, nothing rolls.
func (r *Reload) RestartWorkload(ctx context.Context, in RestartInput) (RestartResult, error) {
	logger := activity.GetLogger(ctx)
	if attempt := activity.GetInfo(ctx).Attempt; attempt > 1 {
		metrics.ReloadRetries.WithLabelValues(in.Scope).Inc()
	}
	obj, err := r.workload(ctx, in.Namespace, in.Kind, in.Name)
	if err != nil {
		if !IsWorkloadGone(err) {
			metrics.ReloadErrors.WithLabelValues(in.Scope).Inc()
		}
		return RestartResult{}, err
	}
	if _, err := time.Parse(time.RFC3339, in.RestartedAt); err != nil {
		return RestartResult{}, fail.Permanent(v1alpha1.ReasonInvalidParameters, fmt.Errorf("restartedAt %q is not an RFC 3339 time", in.RestartedAt))
	}
	template, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "metadata", "annotations")
	meta := obj.GetAnnotations()

	baseline := map[string]any{}
	podTemplate := map[string]any{}
	current := true
	for _, c := range in.Changes {
		key := v1alpha1.ConfigHashAnnotation(c.ConfigMap)
		if template[key] != c.Hash {
			current = false
			podTemplate[key] = c.Hash
		}
		if meta[key] != c.Hash {
			baseline[key] = c.Hash
		}
	}
	if !current {
		podTemplate[v1alpha1.RestartedAtAnnotation] = in.RestartedAt
		baseline[v1alpha1.LastReloadAnnotation] = in.RestartedAt
	}
	if len(baseline) == 0 && len(podTemplate) == 0 {
		logger.Info("workload already current", "kind", in.Kind, "namespace", in.Namespace, "name", in.Name)
		return RestartResult{}, nil
	}
	patch := map[string]any{"metadata": map[string]any{"annotations": baseline}}
	if !current {
		patch["spec"] = map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": podTemplate}}}
	}
	client, err := r.pass(ctx, obj, in.Kind, "Restart", in.RestartedAt+reloadrule.DescribeChanges(in.Changes), in.Policy,
		gate.ReloadEvidence{Changes: in.Changes, Rolls: !current, ApprovalRequest: in.ApprovalRequest}, in.RestartedAt)
	if err != nil {
		return RestartResult{}, err
	}
	if err := patchWorkload(ctx, client, in.Kind, in.Namespace, in.Name, patch); err != nil {
		if IsWorkloadGone(err) {
			return RestartResult{}, err
		}
		// Everything else is retried with the policy's backoff: a denied or
		// forbidden write is usually fixed by an admin, and a newer change supersedes it.
		metrics.ReloadErrors.WithLabelValues(in.Scope).Inc()
		logger.Warn("restart patch failed", "kind", in.Kind, "name", in.Name, "error", err)
		return RestartResult{}, err
	}
	if current {
		logger.Info("baseline recorded, pod template already current", "kind", in.Kind, "name", in.Name)
		return RestartResult{}, nil
	}
	metrics.ReloadRestarts.WithLabelValues(in.Scope).Inc()
	metrics.ReloadDebounced.WithLabelValues(in.Scope).Add(float64(in.Coalesced))
	logger.Info("workload restarted", "kind", in.Kind, "namespace", in.Namespace, "name", in.Name, "restartedAt", in.RestartedAt, "changes", reloadrule.DescribeChanges(in.Changes))
	if err := r.recordEvent(ctx, obj, in); err != nil {
		// The restart happened; a lost Event must not roll the workload again.
		logger.Warn("restart event not recorded", "error", err)
	}
	return RestartResult{Restarted: true}, nil
}

// recordEvent names the ConfigMaps and hashes on the workload; its name is
// fixed per intent, so a retried activity does not duplicate it.
func (r *Reload) recordEvent(ctx context.Context, obj *unstructured.Unstructured, in RestartInput) error {
	return r.workloadEvent(ctx, obj, in.Kind, "reload", in.RestartedAt+reloadrule.DescribeChanges(in.Changes), "Restart", "ConfigReloaded",
		corev1.EventTypeNormal, "rolling restart for ConfigMap changes: "+reloadrule.DescribeChanges(in.Changes))
}

// guard refuses to ask about a restart in a protected namespace: the
// operator does not signal for such a policy, but the namespace may have
// been labelled since. The write gate checks the same rule at every write.
func (r *Reload) guard(ctx context.Context, obj *unstructured.Unstructured, kind, action, key string) error {
	protected, err := gate.NamespaceProtected(ctx, r.Namespaces, obj.GetNamespace())
	if err != nil || !protected {
		return err
	}
	return r.refuse(ctx, obj, kind, action, key, fail.Permanent(v1alpha1.ReasonProtectedNamespace, fmt.Errorf("%s %s %s/%s: %s",
		strings.ToLower(action), kind, obj.GetNamespace(), obj.GetName(), v1alpha1.ProtectedNamespaceMessage(obj.GetNamespace()))))
}

// pass asks the write gate for remedy-reload's writing client for one
// write to the workload obj. A permanent refusal leaves a Warning Event on
// the workload, named after key like the Event of the write it stops, with
// the refusal's reason.
func (r *Reload) pass(ctx context.Context, obj *unstructured.Unstructured, kind, action, key, policy string, ev gate.ReloadEvidence, token string) (dynamic.ResourceInterface, error) {
	writer, err := r.Gate.Pass(ctx, gate.Write{
		Subject: gate.Subject{Kind: gate.SubjectReload, Namespace: obj.GetNamespace(), Name: policy, Reload: &ev},
		Request: actions.Request{Action: "restart", Token: token,
			Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}},
		As: gate.ReloadServiceAccount,
	})
	if err != nil {
		return nil, r.refuse(ctx, obj, kind, action, key, err)
	}
	return writer.Resource(), nil
}

// refuse records a permanent refusal err as a Warning Event on the workload
// and returns err; a retryable one is returned as it is.
func (r *Reload) refuse(ctx context.Context, obj *unstructured.Unstructured, kind, action, key string, err error) error {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.NonRetryable() || app.Type() == v1alpha1.ReasonWorkloadGone {
		return err
	}
	if evErr := r.workloadEvent(ctx, obj, kind, "refused", key, action, app.Type(), corev1.EventTypeWarning,
		"ConfigMap reload refused, nothing restarted: "+app.Error()); evErr != nil {
		activity.GetLogger(ctx).Warn("refusal event not recorded", "error", evErr)
	}
	return err
}

// workloadEvent records an Event on the workload obj, named after key so a
// retried activity does not duplicate it.
func (r *Reload) workloadEvent(ctx context.Context, obj *unstructured.Unstructured, kind, prefix, key, action, reason, typ, note string) error {
	sum := sha256.Sum256([]byte(key))
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: obj.GetName() + "." + prefix + "-" + hex.EncodeToString(sum[:])[:10], Namespace: obj.GetNamespace()},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: "remedy.dev/reload",
		ReportingInstance:   "remedy-worker",
		Action:              action,
		Reason:              reason,
		Type:                typ,
		Note:                fail.Truncate(note, 1024),
		Regarding: corev1.ObjectReference{APIVersion: "apps/v1", Kind: kind, Namespace: obj.GetNamespace(),
			Name: obj.GetName(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion()},
	}
	_, err := r.Events.EventsV1().Events(obj.GetNamespace()).Create(ctx, ev, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create event: %w", err)
	}
	return nil
}

// workload reads one workload as remedy-reload, read-only; a deleted one
// is a permanent WorkloadGone. Every reload activity reads it first, so it
// first requires the caller to be the workload's open reload run
// (OpenRuns.reload); the write gate asks again at the write.
func (r *Reload) workload(ctx context.Context, namespace, kind, name string) (*unstructured.Unstructured, error) {
	if _, ok := workloadResources[kind]; !ok {
		return nil, fail.Permanent(v1alpha1.ReasonInvalidParameters, fmt.Errorf("kind %q cannot be restarted", kind))
	}
	if err := r.Gate.Runs.Reload(ctx, namespace, kind, name); err != nil {
		return nil, err
	}
	inspector, err := r.Gate.Inspector(gate.ReloadServiceAccount)
	if err != nil {
		return nil, err
	}
	obj, err := inspector.Dynamic.Resource(workloadGVR(kind)).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fail.Permanent(v1alpha1.ReasonWorkloadGone, fmt.Errorf("get %s %s/%s: %w", kind, namespace, name, err))
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s/%s: %w", kind, namespace, name, err)
	}
	return obj, nil
}

func workloadGVR(kind string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: workloadResources[kind]}
}

// patchWorkload merge-patches one workload; a deleted one is a permanent WorkloadGone.
func patchWorkload(ctx context.Context, client dynamic.ResourceInterface, kind, namespace, name string, patch map[string]any) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	_, err = client.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "remedy-reload"})
	if apierrors.IsNotFound(err) {
		return fail.Permanent(v1alpha1.ReasonWorkloadGone, fmt.Errorf("patch %s %s/%s: %w", kind, namespace, name, err))
	}
	if err != nil {
		return fmt.Errorf("patch %s %s/%s: %w", kind, namespace, name, err)
	}
	return nil
}

// IsWorkloadGone reports whether err is the permanent failure of a deleted workload.
func IsWorkloadGone(err error) bool {
	var app interface{ Type() string }
	return errors.As(err, &app) && app.Type() == v1alpha1.ReasonWorkloadGone
}

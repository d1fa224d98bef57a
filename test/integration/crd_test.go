package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// Every invalid sample is refused at admission with the message its "# want:" line names.
func TestInvalidSamplesAreRejected(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(harness.Root, "test", "testdata", "invalid", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			require.NoError(t, err)
			first, _, _ := strings.Cut(string(raw), "\n")
			want, ok := strings.CutPrefix(first, "# want: ")
			require.True(t, ok, "first line must be '# want: <message>'")
			objs := decode(t, raw)
			require.Len(t, objs, 1)
			err = harness.Kube().Create(context.Background(), objs[0], ctrlclient.DryRunAll)
			require.Error(t, err, "the API server accepted an invalid object")
			assert.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			assert.Contains(t, err.Error(), want)
		})
	}
}

// Every sample under deploy/samples, the default policy, temporal-dev.yaml, Remedy's
// Deployments and NetworkPolicies are accepted as written.
func TestSamplesAreValid(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(harness.Root, "deploy", "samples", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	// deploy/policies/safety.yaml is not here: the harness installs it for real.
	files = append(files, filepath.Join(harness.Root, "temporal-dev.yaml"),
		filepath.Join(harness.Root, "deploy", "manager", "manager.yaml"), filepath.Join(harness.Root, "deploy", "manager", "drift-webhook.yaml"))
	network, err := filepath.Glob(filepath.Join(harness.Root, "deploy", "network", "*.yaml"))
	require.NoError(t, err)
	for _, f := range network {
		if filepath.Base(f) != "kustomization.yaml" {
			files = append(files, f)
		}
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "demo"}}}
	if err := harness.Kube().Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, o := range decode(t, raw) {
				require.NoError(t, harness.Kube().Create(context.Background(), o, ctrlclient.DryRunAll))
			}
		})
	}
}

func TestSpecsAreImmutable(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	rar := &v1alpha1.RemediationApprovalRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "approve-me", Namespace: ns},
		Spec: v1alpha1.RemediationApprovalRequestSpec{
			SubjectRef: v1alpha1.ObjectRef{APIVersion: "remedy.dev/v1alpha1", Kind: "KubernetesExecution", Namespace: ns, Name: "x"},
			WorkflowID: "kexec/x",
			ApprovalContext: v1alpha1.ApprovalContext{
				Reason: "policy", Action: "scale",
				Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"},
			},
			RequiredBy: metav1.Now(),
		},
	}
	// Only the worker creates approval requests (deploy/admission).
	worker := asWorker(t)
	require.NoError(t, worker.Create(ctx, rar))
	rar.Spec.ApprovalContext.Reason = "changed my mind"
	err := harness.Kube().Update(ctx, rar)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec is immutable")

	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	rar.Status.Decision, rar.Status.DecidedBy, rar.Status.DecidedVia = v1alpha1.DecisionApproved, "alice", v1alpha1.DecidedViaSignal
	require.NoError(t, worker.Status().Update(ctx, rar))
	rar.Status.Decision = v1alpha1.DecisionRejected
	err = worker.Status().Update(ctx, rar)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "decision is final once set")
}

func decode(t *testing.T, raw []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var o unstructured.Unstructured
		err := dec.Decode(&o.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		if len(o.Object) > 0 {
			out = append(out, &o)
		}
	}
}

// Every duration field of every CRD refuses a value that is not a duration
// with a 422 naming the field, and accepts the forms people write.
// Long: a table of every CRD's duration fields.
func TestDurationsAreValidatedAtAdmission(t *testing.T) {
	ns := harness.Namespace(t)
	bad := v1alpha1.Duration("5 s")
	policy := func(set func(*v1alpha1.ConfigReloadPolicySpec)) ctrlclient.Object {
		p := &v1alpha1.ConfigReloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}}
		set(&p.Spec)
		return p
	}
	execution := func(set func(*v1alpha1.KubernetesExecutionSpec)) ctrlclient.Object {
		k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: ns}, Spec: scaleSpec(ns, "web", 2)}
		set(&k.Spec)
		return k
	}
	request := func(set func(*v1alpha1.KubernetesExecutionSpec)) ctrlclient.Object {
		rr := &v1alpha1.RemediationRequest{ObjectMeta: metav1.ObjectMeta{Name: "rr", Namespace: ns}}
		ok, step := scaleSpec(ns, "web", 2), scaleSpec(ns, "web", 3)
		set(&step)
		rr.Spec.Steps = []v1alpha1.RemediationStep{{Name: "ok", Execution: ok}, {Name: "bad", Execution: step}}
		return rr
	}
	// Both retry intervals take the value, so the order rule between them holds.
	cond := func(d *v1alpha1.Duration) []v1alpha1.Condition {
		return []v1alpha1.Condition{{Name: "up", Rego: "package up\npass := true", Required: true, Timeout: d}}
	}
	tests := []struct {
		path string
		obj  func(d *v1alpha1.Duration) ctrlclient.Object
	}{
		{"spec.debounce", func(d *v1alpha1.Duration) ctrlclient.Object {
			return policy(func(s *v1alpha1.ConfigReloadPolicySpec) { s.Debounce = d })
		}},
		{"spec.retry.initialInterval", func(d *v1alpha1.Duration) ctrlclient.Object {
			return policy(func(s *v1alpha1.ConfigReloadPolicySpec) {
				s.Retry = &v1alpha1.RetrySpec{InitialInterval: d, MaxInterval: d}
			})
		}},
		{"spec.retry.maxInterval", func(d *v1alpha1.Duration) ctrlclient.Object {
			return policy(func(s *v1alpha1.ConfigReloadPolicySpec) {
				s.Retry = &v1alpha1.RetrySpec{InitialInterval: d, MaxInterval: d}
			})
		}},
		{"spec.approval.timeout", func(d *v1alpha1.Duration) ctrlclient.Object {
			return policy(func(s *v1alpha1.ConfigReloadPolicySpec) { s.Approval = &v1alpha1.ApprovalSpec{Timeout: d} })
		}},
		{"spec.timeout", func(d *v1alpha1.Duration) ctrlclient.Object {
			return execution(func(s *v1alpha1.KubernetesExecutionSpec) { s.Timeout = d })
		}},
		{"spec.rollbackWindow", func(d *v1alpha1.Duration) ctrlclient.Object {
			return execution(func(s *v1alpha1.KubernetesExecutionSpec) { s.RollbackWindow = d })
		}},
		{"spec.approval.timeout", func(d *v1alpha1.Duration) ctrlclient.Object {
			return execution(func(s *v1alpha1.KubernetesExecutionSpec) { s.Approval = &v1alpha1.ApprovalSpec{Timeout: d} })
		}},
		{"spec.preConditions[0].timeout", func(d *v1alpha1.Duration) ctrlclient.Object {
			return execution(func(s *v1alpha1.KubernetesExecutionSpec) { s.PreConditions = cond(d) })
		}},
		{"spec.postConditions[0].timeout", func(d *v1alpha1.Duration) ctrlclient.Object {
			return execution(func(s *v1alpha1.KubernetesExecutionSpec) { s.PostConditions = cond(d) })
		}},
		{"spec.steps[1].execution.timeout", func(d *v1alpha1.Duration) ctrlclient.Object {
			return request(func(s *v1alpha1.KubernetesExecutionSpec) { s.Timeout = d })
		}},
		{"spec.steps[1].execution.rollbackWindow", func(d *v1alpha1.Duration) ctrlclient.Object {
			return request(func(s *v1alpha1.KubernetesExecutionSpec) { s.RollbackWindow = d })
		}},
		{"spec.steps[1].execution.approval.timeout", func(d *v1alpha1.Duration) ctrlclient.Object {
			return request(func(s *v1alpha1.KubernetesExecutionSpec) { s.Approval = &v1alpha1.ApprovalSpec{Timeout: d} })
		}},
		{"spec.steps[1].execution.preConditions[0].timeout", func(d *v1alpha1.Duration) ctrlclient.Object {
			return request(func(s *v1alpha1.KubernetesExecutionSpec) { s.PreConditions = cond(d) })
		}},
		{"spec.steps[1].execution.postConditions[0].timeout", func(d *v1alpha1.Duration) ctrlclient.Object {
			return request(func(s *v1alpha1.KubernetesExecutionSpec) { s.PostConditions = cond(d) })
		}},
	}
	ctx := context.Background()
	for _, tt := range tests {
		obj := tt.obj(&bad)
		t.Run(fmt.Sprintf("%T/%s", obj, tt.path), func(t *testing.T) {
			err := harness.Kube().Create(ctx, obj, ctrlclient.DryRunAll)
			require.Error(t, err, "the API server accepted %s: %q", tt.path, bad)
			assert.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
			assert.Contains(t, err.Error(), tt.path+`: Invalid value: "5 s": must be a duration such as 30s, 5m or 1h30m`)
			for _, v := range []v1alpha1.Duration{"-1s", "5", "1 h", "5sec", ""} {
				assert.Error(t, harness.Kube().Create(ctx, tt.obj(&v), ctrlclient.DryRunAll), "%s: %q accepted", tt.path, v)
			}
			valid := []v1alpha1.Duration{"0s", "1h30m", "1.5s", "500ms", "2h"}
			if strings.Contains(tt.path, "Conditions[") {
				// Conditions' timeouts add up to at most 10m.
				valid = []v1alpha1.Duration{"0s", "9m30s", "1.5s", "500ms", "10m"}
				long := v1alpha1.Duration("10m1s")
				err := harness.Kube().Create(ctx, tt.obj(&long), ctrlclient.DryRunAll)
				require.Error(t, err, "%s: %q accepted", tt.path, long)
				assert.Contains(t, err.Error(), "the timeouts of preConditions and postConditions must add up to at most 10m")
			}
			for _, v := range valid {
				assert.NoError(t, harness.Kube().Create(ctx, tt.obj(&v), ctrlclient.DryRunAll), "%s: %q refused", tt.path, v)
			}
		})
	}
}

// A typed read-modify-write of an execution keeps its defaulted durations as
// written ("5m", not "5m0s"), so the immutable spec does not refuse it.
func TestTypedUpdateKeepsDurations(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: "scale", Namespace: ns},
		Spec: v1alpha1.KubernetesExecutionSpec{Action: "scale", Target: target(ns, "absent"), Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](1)},
			PostConditions: []v1alpha1.Condition{{Name: "up", Rego: "package up\npass := true"}}}}
	require.NoError(t, harness.Kube().Create(ctx, k))
	require.Equal(t, ptr.To(v1alpha1.Duration("5m")), k.Spec.Timeout, "the CRD default, as written")
	require.Equal(t, ptr.To(v1alpha1.Duration("30s")), k.Spec.PostConditions[0].Timeout)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur v1alpha1.KubernetesExecution
		if err := harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(k), &cur); err != nil {
			return err
		}
		cur.Labels = map[string]string{"team": "web"}
		return harness.Kube().Update(ctx, &cur)
	}))
}

// Settings Remedy reads from namespaces are refused when mistyped, as the
// same typo on a workload is; valid values and unrelated edits still pass.
func TestNamespaceSettingsAreChecked(t *testing.T) {
	ctx := context.Background()
	namespace := func(labels, annotations map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "settings-" + string(uuid.NewUUID())[:8], Labels: labels, Annotations: annotations}}
	}
	refused := []struct {
		ns   *corev1.Namespace
		want string
	}{
		{namespace(nil, map[string]string{"kausality.io/mode": "enforcing"}), `annotation kausality.io/mode: "enforcing" is not a mode, want "log" or "enforce"`},
		{namespace(map[string]string{"remedy.dev/protected": "yes"}, nil), `label remedy.dev/protected: "yes" is neither "true" (protected) nor "false"`},
		{namespace(map[string]string{"remedy.dev/drift-webhook": "disable"}, nil), `label remedy.dev/drift-webhook: "disable" is not "disabled"`},
	}
	for _, tt := range refused {
		err := harness.Kube().Create(ctx, tt.ns, ctrlclient.DryRunAll)
		require.Error(t, err, tt.want)
		assert.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
		assert.Contains(t, err.Error(), tt.want)
	}
	for _, ns := range []*corev1.Namespace{
		namespace(map[string]string{"remedy.dev/protected": "true", "remedy.dev/drift-webhook": "disabled"}, map[string]string{"kausality.io/mode": "enforce"}),
		namespace(map[string]string{"remedy.dev/protected": "false"}, map[string]string{"kausality.io/mode": "log"}),
		namespace(nil, nil),
	} {
		require.NoError(t, harness.Kube().Create(ctx, ns, ctrlclient.DryRunAll), "%v %v", ns.Labels, ns.Annotations)
	}

	// A mode set later is checked too.
	ns := harness.Namespace(t)
	err := harness.Kube().Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		ctrlclient.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"kausality.io/mode":"Enforce"}}}`)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `annotation kausality.io/mode: "Enforce" is not a mode`)

	// The approval timeout of the namespace's remedy-config.
	config := func(timeout string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "remedy-config", Namespace: ns}, Data: map[string]string{"approvalTimeout": timeout}}
	}
	for _, v := range []string{"5 m", "0s", "-1h", "30"} {
		err := harness.Kube().Create(ctx, config(v), ctrlclient.DryRunAll)
		require.Error(t, err, v)
		assert.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
		assert.Contains(t, err.Error(), `data.approvalTimeout: "`+v+`" must be a positive duration`)
	}
	require.NoError(t, harness.Kube().Create(ctx, config("45m"), ctrlclient.DryRunAll))
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}, Data: map[string]string{"approvalTimeout": "5 m"}}
	require.NoError(t, harness.Kube().Create(ctx, other, ctrlclient.DryRunAll), "only remedy-config is Remedy's")
}

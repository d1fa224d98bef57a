package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/activities/execution"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/worker"
)

// executorJob has the shape of the worker's executor Jobs (activities/execution/job.go).
func executorJob() *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "remedy-scale-", Namespace: devenv.Namespace},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			ServiceAccountName: "remedy-action-scale",
			RestartPolicy:      corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "exec", Image: worker.DefaultExecImage, Command: []string{"/remedy", "exec"},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		}}},
	}
}

// gateToken is a projected ServiceAccount token volume of audience ("" : the API server's).
func gateToken(audience string, seconds int64) corev1.Volume {
	return corev1.Volume{Name: "exec-gate", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: audience, ExpirationSeconds: ptr.To(seconds), Path: "token"}}}}}}
}

func workerClientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg, err := devenv.ServiceAccountConfig(context.Background(), harness.Config(), devenv.Namespace, "remedy-worker")
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

func dryRunJob(cs kubernetes.Interface, job *batchv1.Job) error {
	_, err := cs.BatchV1().Jobs(job.Namespace).Create(context.Background(), job, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// TestWorkerMayCreateOnlyExecutorJobs sends Jobs with the worker's own token:
// deploy/admission/worker-jobs.yaml refuses every one that is not an executor Job.
func TestWorkerMayCreateOnlyExecutorJobs(t *testing.T) {
	cs := workerClientset(t)
	// The policy was installed with the harness; wait until the API server enforces it.
	probe := executorJob()
	probe.Spec.Template.Spec.ServiceAccountName = "default"
	require.Eventually(t, func() bool { return apierrors.IsForbidden(dryRunJob(cs, probe)) }, 30*time.Second, 200*time.Millisecond,
		"remedy-worker-jobs policy never enforced")

	tests := []struct {
		name   string
		mutate func(*corev1.PodSpec)
		refuse string // "" when admitted
	}{
		{"the executor's own shape is admitted", func(*corev1.PodSpec) {}, ""},
		{"default ServiceAccount", func(p *corev1.PodSpec) { p.ServiceAccountName = "default" }, "must run as a remedy-action-* ServiceAccount"},
		{"another of Remedy's accounts", func(p *corev1.PodSpec) { p.ServiceAccountName = "remedy-operator" }, "must run as a remedy-action-* ServiceAccount"},
		{"another image", func(p *corev1.PodSpec) { p.Containers[0].Image = "busybox:1.36" }, "must run only the exec image " + worker.DefaultExecImage},
		{"an init container with another image", func(p *corev1.PodSpec) {
			p.InitContainers = []corev1.Container{{Name: "init", Image: "busybox:1.36"}}
		}, "must run only the exec image"},
		{"a hostPath volume", func(p *corev1.PodSpec) {
			p.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			p.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "root", MountPath: "/host"}}
		}, "must not declare volumes"},
		{"a Secret volume", func(p *corev1.PodSpec) {
			p.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "remedy-webhook-tls"}}}}
		}, "must not declare volumes"},
		{"the exec gate's token is admitted", func(p *corev1.PodSpec) { p.Volumes = []corev1.Volume{gateToken(execution.ExecGateAudience, 600)} }, ""},
		{"a token for the API server", func(p *corev1.PodSpec) { p.Volumes = []corev1.Volume{gateToken("", 600)} }, "must not declare volumes but the exec gate's token"},
		{"a long-lived gate token", func(p *corev1.PodSpec) { p.Volumes = []corev1.Volume{gateToken(execution.ExecGateAudience, 86400)} }, "must not declare volumes"},
		{"restarted in place", func(p *corev1.PodSpec) { p.RestartPolicy = corev1.RestartPolicyOnFailure }, "must have backoffLimit 0 and restartPolicy Never"},
		{"host network", func(p *corev1.PodSpec) { p.HostNetwork = true }, "must not use the host's network"},
		{"host PID", func(p *corev1.PodSpec) { p.HostPID = true }, "must not use the host's network, PID"},
		{"privileged", func(p *corev1.PodSpec) {
			p.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}, "must not run privileged containers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := executorJob()
			tt.mutate(&job.Spec.Template.Spec)
			err := dryRunJob(cs, job)
			if tt.refuse == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, apierrors.IsForbidden(err), "%v", err)
			assert.Contains(t, err.Error(), "ValidatingAdmissionPolicy 'remedy-worker-jobs'")
			assert.Contains(t, err.Error(), tt.refuse)
		})
	}

	t.Run("retried by the Job controller", func(t *testing.T) {
		job := executorJob()
		job.Spec.BackoffLimit = ptr.To[int32](1)
		err := dryRunJob(cs, job)
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.Contains(t, err.Error(), "must have backoffLimit 0")
		job.Spec.BackoffLimit = nil // defaulted to 6
		assert.ErrorContains(t, dryRunJob(cs, job), "must have backoffLimit 0")
	})

	t.Run("other users are not bound by it", func(t *testing.T) {
		require.NoError(t, dryRunJob(admin(t), probe), "the policy is about the worker's identity only")
	})
}

// TestRemedySystemEnforcesRestrictedPodSecurity shows the namespace's Pod
// Security labels take effect, and that every pod Remedy ships for it meets them.
func TestRemedySystemEnforcesRestrictedPodSecurity(t *testing.T) {
	pods := admin(t).CoreV1().Pods(devenv.Namespace)
	create := func(name string, spec corev1.PodSpec) error {
		_, err := pods.Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}

	err := create("root-shell", corev1.PodSpec{Containers: []corev1.Container{{Name: "sh", Image: "busybox:1.36"}}})
	require.Error(t, err, "a pod that is not restricted must be refused in remedy-system")
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Contains(t, err.Error(), `violates PodSecurity "restricted:v1.36"`)

	files, err := filepath.Glob(filepath.Join(harness.Root, "deploy", "manager", "*.yaml"))
	require.NoError(t, err)
	files = append(files, filepath.Join(harness.Root, "temporal-dev.yaml"))
	seen := 0
	for _, f := range files {
		for _, d := range deployments(t, f) {
			seen++
			assert.NoError(t, create(d.Name, d.Spec.Template.Spec), "%s: Deployment %s", filepath.Base(f), d.Name)
		}
	}
	assert.Equal(t, 4, seen, "operator, worker, drift webhook and temporal-dev")
}

// deployments decodes the Deployments of a multi-document manifest.
func deployments(t *testing.T, path string) []appsv1.Deployment {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []appsv1.Deployment
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var d appsv1.Deployment
		require.NoError(t, utilyaml.Unmarshal([]byte(doc), &d), path)
		if d.Kind == "Deployment" {
			out = append(out, d)
		}
	}
	return out
}

package deploy

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/release"
	"github.com/remedy-dev/remedy/test/procs"
)

// TestMetadataWritersDryRun: the operator's, the drift webhook's and
// remedy-drift's tokens may patch a Deployment's annotations, but a
// server-side dry run of an image change as any of them is refused by
// deploy/admission/metadata-writers.yaml, and so is any other change
// beyond their own annotations.
// Long: a table of accounts, each with a table of refused changes.
func TestMetadataWritersDryRun(t *testing.T) {
	ctx := context.Background()
	admin := procs.Clientset(t)
	ns := "metadata-writers"
	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	createdOrExists(t, err)
	labels := map[string]string{"app": "web"}
	web := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: release.Image()}}}}},
	}
	_, err = admin.AppsV1().Deployments(ns).Create(ctx, web, metav1.CreateOptions{})
	createdOrExists(t, err)
	nightly := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ns},
		Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "job", Image: "busybox:1.36"}}}}}}},
	}
	_, err = admin.BatchV1().CronJobs(ns).Create(ctx, nightly, metav1.CreateOptions{})
	createdOrExists(t, err)

	image := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"attacker.example/web:evil"}]}}}}`)
	dryRun := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}
	refused := func(t *testing.T, err error, want string) {
		t.Helper()
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.Contains(t, err.Error(), "ValidatingAdmissionPolicy 'remedy-metadata-writers'")
		assert.Contains(t, err.Error(), want)
	}

	for _, tc := range []struct {
		account    string
		annotation string // one of its own
	}{
		{"remedy-operator", "remedy.dev/config-hash-app"},
		{"remedy-webhook", "kausality.io/controllers"},
		{"remedy-drift", "kausality.io/rejections"},
	} {
		t.Run(tc.account, func(t *testing.T) {
			cfg, err := devenv.ServiceAccountConfig(ctx, procs.Env().Config, devenv.Namespace, tc.account)
			require.NoError(t, err)
			cs, err := kubernetes.NewForConfig(cfg)
			require.NoError(t, err)
			deployments := cs.AppsV1().Deployments(ns)

			// The policy was installed with deploy/admission; wait until the API server enforces it.
			require.Eventually(t, func() bool {
				_, err := deployments.Patch(ctx, "web", types.StrategicMergePatchType, image, dryRun)
				return apierrors.IsForbidden(err)
			}, 30*time.Second, 200*time.Millisecond, "remedy-metadata-writers never enforced")

			t.Run("a dry run of an image change is refused", func(t *testing.T) {
				_, err := deployments.Patch(ctx, "web", types.StrategicMergePatchType, image, dryRun)
				refused(t, err, "may change only annotations of deployments, not spec")
			})
			t.Run("the same change as an update is refused", func(t *testing.T) {
				// The Deployment controller writes status meanwhile: a conflict is asked again.
				err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					d, err := deployments.Get(ctx, "web", metav1.GetOptions{})
					require.NoError(t, err)
					d.Spec.Template.Spec.Containers[0].Image = "attacker.example/web:evil"
					_, err = deployments.Update(ctx, d, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
					return err
				})
				if tc.account == "remedy-webhook" {
					refused(t, err, "not spec")
				} else {
					assert.True(t, apierrors.IsForbidden(err), "%s holds no update: %v", tc.account, err)
				}
			})
			for _, bad := range []struct{ name, patch, want string }{
				{"a scale", `{"spec":{"replicas":5}}`, "not spec"},
				{"a label", `{"metadata":{"labels":{"app":"other"}}}`, "not metadata.labels"},
				{"an ownerReference, which would have the garbage collector delete it",
					`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"00000000-0000-0000-0000-000000000000"}]}}`,
					"not metadata.ownerReferences"},
				{"a finalizer", `{"metadata":{"finalizers":["example.com/hold"]}}`, "not metadata.finalizers"},
				{"another's annotation", `{"metadata":{"annotations":{"deployment.kubernetes.io/revision":"99"}}}`, "not deployment.kubernetes.io/revision"},
				{"a look-alike of its own", `{"metadata":{"annotations":{"remedy.dev/reload-declined-x":"1","kausality.io":"1"}}}`, "may change only annotations"},
			} {
				t.Run(bad.name+" is refused", func(t *testing.T) {
					_, err := deployments.Patch(ctx, "web", types.MergePatchType, []byte(bad.patch), dryRun)
					refused(t, err, bad.want)
				})
			}
			t.Run("its own annotation is written", func(t *testing.T) {
				patch := []byte(`{"metadata":{"annotations":{"` + tc.annotation + `":"` + tc.account + `"}}}`)
				_, err := deployments.Patch(ctx, "web", types.MergePatchType, patch, dryRun)
				require.NoError(t, err, "dry run")
				d, err := deployments.Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{})
				require.NoError(t, err)
				assert.Equal(t, tc.account, d.Annotations[tc.annotation])
				assert.Equal(t, release.Image(), d.Spec.Template.Spec.Containers[0].Image)
			})
			if tc.account == "remedy-webhook" {
				t.Run("a CronJob's schedule, another parent kind, is refused", func(t *testing.T) {
					_, err := cs.BatchV1().CronJobs(ns).Patch(ctx, "nightly", types.MergePatchType, []byte(`{"spec":{"schedule":"* * * * *"}}`), dryRun)
					refused(t, err, "may change only annotations of cronjobs, not spec")
				})
			}
		})
	}

	t.Run("other users are not bound by it", func(t *testing.T) {
		_, err := admin.AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType, image, dryRun)
		require.NoError(t, err)
	})
}

// createdOrExists lets a test run again with -count against the same parts.
func createdOrExists(t *testing.T, err error) {
	t.Helper()
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

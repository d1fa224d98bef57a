package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/release"
	"github.com/remedy-dev/remedy/operator"
	"github.com/remedy-dev/remedy/test/harness"
)

const (
	configPassword = "cm-password-5b7e1"
	envPassword    = "env-password-9c3a2"
	secretData     = "secret-data-2f8d4"
)

// valuedTargets is a ConfigMap settings whose data holds a password, and a
// Deployment web whose env holds one inline and takes another from a Secret.
func valuedTargets(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, harness.Kube().Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns},
		Data: map[string]string{"password": configPassword, "mode": "fast"}}))
	require.NoError(t, harness.Kube().Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		StringData: map[string]string{"token": secretData}}))
	labels := map[string]string{"app": "web"}
	require.NoError(t, harness.Kube().Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "web", Image: release.Image(), Env: []corev1.EnvVar{
					{Name: "DB_PASSWORD", Value: envPassword},
					{Name: "API_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "token"}}},
				}}}}}},
	}))
}

// patchSpecOf patches target with body, dry-running first.
func patchSpecOf(target v1alpha1.ObjectRef, body string, window time.Duration, pre ...v1alpha1.Condition) v1alpha1.KubernetesExecutionSpec {
	return v1alpha1.KubernetesExecutionSpec{Action: "patch", Target: target, DryRun: true, PreConditions: pre,
		Parameters: &v1alpha1.ActionParameters{Patch: &apiextensionsv1.JSON{Raw: []byte(body)}}, RollbackWindow: v1alpha1.DurationOf(window)}
}

func settingsRef(ns string) v1alpha1.ObjectRef {
	return v1alpha1.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "settings"}
}

const (
	rotateSettings = `{"data":{"password":"rotated-1"}}`
	// setEnv replaces web's env (a merge patch replaces the containers list),
	// so its inverse holds the whole live env.
	setEnv = `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"IMAGE","env":[{"name":"DB_PASSWORD","value":"rotated-2"}]}]}}}}`
)

// published is the execution and every Event of its namespace, as JSON a reader sees.
func published(t *testing.T, k *v1alpha1.KubernetesExecution) string {
	t.Helper()
	var evs eventsv1.EventList
	require.NoError(t, harness.Kube().List(context.Background(), &evs, ctrlclient.InNamespace(k.Namespace)))
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(k))
	require.NoError(t, enc.Encode(evs))
	return b.String()
}

// requireNoValues asserts that none of the targets' values is in the execution or its namespace's Events.
func requireNoValues(t *testing.T, k *v1alpha1.KubernetesExecution) {
	t.Helper()
	all := published(t, k)
	for _, v := range []string{configPassword, envPassword, secretData, "secretKeyRef"} {
		assert.NotContains(t, all, v)
	}
}

func runAs(t *testing.T, user, ns, name string, spec v1alpha1.KubernetesExecutionSpec) *v1alpha1.KubernetesExecution {
	t.Helper()
	k := &v1alpha1.KubernetesExecution{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	require.NoError(t, impersonating(t, user).Create(context.Background(), k))
	return k
}

func liveEnv(t *testing.T, ns string) []corev1.EnvVar {
	t.Helper()
	var d appsv1.Deployment
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: "web"}, &d))
	return d.Spec.Template.Spec.Containers[0].Env
}

func livePassword(t *testing.T, ns string) string {
	t.Helper()
	var cm corev1.ConfigMap
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKey{Namespace: ns, Name: "settings"}, &cm))
	return cm.Data["password"]
}

// The exploit: a user with only `execute` on patch, and no `get` on the
// ConfigMap or the Deployment, read their passwords from the execution's
// status, which the forced dry-run and the plan filled before a precondition
// failed with nothing written. Now the dry-run comes after the preconditions,
// and a run that writes shows markers instead of values; its rollback still
// restores the real ones.
func TestWriteRevealsNothingToARequesterWhoMayNotRead(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	valuedTargets(t, ns)
	grantRules(t, ns, "patcher-pat", createExecutions, execute("patch"))
	web := target(ns, "web")
	env := strings.Replace(setEnv, "IMAGE", release.Image(), 1)
	check := v1alpha1.Condition{Name: "check", Required: true, Timeout: v1alpha1.DurationOf(2 * time.Second), Rego: "package pre.check\n\npass := false\n"}

	// A precondition stops both runs before anything of the targets is computed.
	for _, tc := range []struct {
		name   string
		target v1alpha1.ObjectRef
		body   string
	}{{"pre-settings", settingsRef(ns), rotateSettings}, {"pre-web", web, env}} {
		k := waitPhase(t, runAs(t, "patcher-pat", ns, tc.name, patchSpecOf(tc.target, tc.body, time.Hour, check)), v1alpha1.PhaseFailed)
		assert.Nil(t, k.Status.ValidationResults.DryRunResults, "no dry-run before the preconditions")
		assert.Nil(t, k.Status.ExecutionResults)
		requireNoValues(t, k)
	}
	assert.Equal(t, configPassword, livePassword(t, ns))

	// A run that writes the ConfigMap shows the requester markers.
	k := waitPhase(t, runAs(t, "patcher-pat", ns, "rotate", patchSpecOf(settingsRef(ns), rotateSettings, 0)), v1alpha1.PhaseCompleted)
	assert.Equal(t, v1alpha1.ReasonSucceeded, k.Status.Reason, k.Status.Message)
	assert.Equal(t, "rotated-1", livePassword(t, ns))
	denied := "<redacted: patcher-pat may not get configmaps/settings>"
	assert.Equal(t, denied, k.Status.ValidationResults.DryRunResults.EstimatedImpact)
	assert.Equal(t, denied, k.Status.ExecutionResults.ResourcesAffected[0].Before)
	assert.Equal(t, denied, k.Status.ExecutionResults.ResourcesAffected[0].After, "after values are not shown either")
	requireNoValues(t, k)

	// A run that sets the Deployment's env: RollbackReady shows no inverse,
	// and the rollback, asked by annotation, restores the real env.
	k = waitPhase(t, runAs(t, "patcher-pat", ns, "set-env", patchSpecOf(web, env, time.Hour)), v1alpha1.PhaseRollbackReady)
	assert.Equal(t, []corev1.EnvVar{{Name: "DB_PASSWORD", Value: "rotated-2"}}, liveEnv(t, ns))
	rb := k.Status.RollbackInformation
	require.NotNil(t, rb)
	assert.True(t, rb.Available)
	assert.Nil(t, rb.RollbackParameters)
	assert.Equal(t, "<redacted: patcher-pat may not get deployments.apps/web>", rb.Redacted)
	assert.Regexp(t, `^hmac-sha256:[0-9a-f]{64}$`, rb.ParametersDigest)
	requireNoValues(t, k)

	before := k.DeepCopy()
	k.Annotations = map[string]string{operator.RollbackAnnotation: "wrong password"}
	require.NoError(t, impersonating(t, "patcher-pat").Patch(ctx, k, ctrlclient.MergeFrom(before)))
	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, v1alpha1.ReasonRolledBack, k.Status.Reason, k.Status.Message)
	restored := liveEnv(t, ns)
	require.Len(t, restored, 2)
	assert.Equal(t, envPassword, restored[0].Value, "the gate let the captured inverse through")
	assert.Equal(t, "db", restored[1].ValueFrom.SecretKeyRef.Name)
	requireNoValues(t, k)
}

// A requester who may get the targets reads their values as before, except
// where a value comes from: valueFrom, and so any Secret, never shows.
func TestWriteShowsValuesToARequesterWhoMayRead(t *testing.T) {
	ns := harness.Namespace(t)
	valuedTargets(t, ns)
	grantRules(t, ns, "reader-rhea", createExecutions, execute("patch"),
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get"}})

	k := waitPhase(t, runAs(t, "reader-rhea", ns, "rotate", patchSpecOf(settingsRef(ns), rotateSettings, 0)), v1alpha1.PhaseCompleted)
	assert.Equal(t, `data.password: "`+configPassword+`" -> "rotated-1"`, k.Status.ValidationResults.DryRunResults.EstimatedImpact)
	assert.Equal(t, `data.password: "`+configPassword+`"`, k.Status.ExecutionResults.ResourcesAffected[0].Before)

	k = waitPhase(t, runAs(t, "reader-rhea", ns, "set-env", patchSpecOf(target(ns, "web"), strings.Replace(setEnv, "IMAGE", release.Image(), 1), time.Hour)),
		v1alpha1.PhaseRollbackReady)
	rb := k.Status.RollbackInformation
	require.NotNil(t, rb)
	require.NotNil(t, rb.RollbackParameters)
	assert.Contains(t, string(rb.RollbackParameters.Patch.Raw), envPassword)
	assert.Contains(t, k.Status.ExecutionResults.ResourcesAffected[0].Before, envPassword)
	all := published(t, k)
	assert.NotContains(t, all, "secretKeyRef", "valueFrom never shows")
	assert.NotContains(t, all, secretData)
	assert.Contains(t, all, "<redacted: valueFrom is never shown>")
}

package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/internal/release"
)

// Namespace creates a fresh namespace for one test.
func Namespace(t testing.TB) string {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t-" + hex.EncodeToString(b)}}
	require.NoError(t, kube.Create(context.Background(), ns))
	return ns.Name
}

// DemoContainer runs `remedy demo-app` from Remedy's image, which a node has
// imported (no registry is ever contacted), ready once it serves /readyz.
func DemoContainer(name string) corev1.Container {
	return corev1.Container{
		Name: name, Image: release.Image(), Args: []string{"demo-app"},
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("http")}},
			PeriodSeconds: 1,
		},
	}
}

// Deployment creates a Deployment of the demo app; its Pods run only in a
// package with a node (Options.Node).
func Deployment(t testing.TB, namespace, name string, replicas int32) *appsv1.Deployment {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{DemoContainer(name)}},
			},
		},
	}
	require.NoError(t, kube.Create(context.Background(), d))
	return d
}

// Eventually polls get until cond holds, failing with the last object seen.
func Eventually[T ctrlclient.Object](t testing.TB, obj T, timeout time.Duration, cond func(T) bool) T {
	t.Helper()
	var err error
	if !assert.Eventually(t, func() bool {
		err = kube.Get(context.Background(), ctrlclient.ObjectKeyFromObject(obj), obj)
		return err == nil && cond(obj)
	}, timeout, 50*time.Millisecond) {
		require.Failf(t, "condition not met", "after %s; last error %v; last object: %+v", timeout, err, obj)
	}
	return obj
}

// As grants user rules in namespace (a Role and its RoleBinding, both named
// for the user) and returns a client that acts as the user.
func As(t testing.TB, namespace, user string, rules ...rbacv1.PolicyRule) ctrlclient.Client {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, kube.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: namespace}, Rules: rules}))
	require.NoError(t, kube.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: namespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}))
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: kube.Scheme()})
	require.NoError(t, err)
	return c
}

package deploy_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// certificate is the part of a cert-manager Certificate these tests read.
type certificate struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		SecretName string   `json:"secretName"`
		DNSNames   []string `json:"dnsNames"`
	} `json:"spec"`
}

// Every serving certificate of deploy/manager names its Service, whose
// selected Deployment mounts the certificate's Secret and declares the port
// the Service targets: a renamed Secret, Service or port fails here, not in
// a cluster.
func TestServingCertificates(t *testing.T) {
	services := map[string]corev1.Service{}
	for _, o := range objects(t, filepath.Join("manager", "*.yaml"), "Service") {
		var s corev1.Service
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o, &s, true))
		services[s.Name] = s
	}
	all := deployments(t, filepath.Join("manager", "*.yaml"))
	certs := certificates(t)
	require.Contains(t, certs, "remedy-codec", "the codec server has its certificate")
	for _, c := range certs {
		assert.Equal(t, remedyNamespace, c.Metadata.Namespace, c.Metadata.Name)
		svc, ok := services[c.Metadata.Name]
		require.True(t, ok, "Certificate %s has a Service of its name", c.Metadata.Name)
		host := svc.Name + "." + svc.Namespace + ".svc"
		assert.Subset(t, c.Spec.DNSNames, []string{host, host + ".cluster.local"}, "%s names its Service", c.Metadata.Name)
		var served *appsv1.Deployment
		for i, d := range all {
			if selects(t, metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, d.Spec.Template.Labels) {
				served = &all[i]
			}
		}
		require.NotNil(t, served, "Service %s selects a Deployment", svc.Name)
		mounted := false
		for _, v := range served.Spec.Template.Spec.Volumes {
			mounted = mounted || (v.Secret != nil && v.Secret.SecretName == c.Spec.SecretName)
		}
		assert.True(t, mounted, "%s mounts %s", served.Name, c.Spec.SecretName)
		for _, p := range svc.Spec.Ports {
			assert.Contains(t, containerPortNames(*served), p.TargetPort.StrVal, "Service %s targets a port %s declares, by name", svc.Name, served.Name)
		}
	}
}

// The operator serves the codec server on its declared port, with the
// certificate of Secret remedy-codec-tls, and Service remedy-codec reaches it.
func TestCodecServerDeployed(t *testing.T) {
	var op appsv1.Deployment
	for _, d := range deployments(t, filepath.Join("manager", "*.yaml")) {
		if d.Name == "remedy-operator" {
			op = d
		}
	}
	require.Equal(t, "remedy-operator", op.Name)
	c := op.Spec.Template.Spec.Containers[0]
	port := int32(0)
	for _, p := range c.Ports {
		if p.Name == codecPort {
			port = p.ContainerPort
		}
	}
	require.NotZero(t, port, "the operator declares the codec port")
	assert.Contains(t, c.Args, fmt.Sprintf("--codec-addr=:%d", port), "it listens on the declared port, on every interface")

	mountOf := map[string]string{}
	for _, m := range c.VolumeMounts {
		mountOf[m.Name] = m.MountPath
	}
	dir := ""
	for _, v := range op.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == certificates(t)["remedy-codec"].Spec.SecretName {
			dir = mountOf[v.Name]
		}
	}
	require.NotEmpty(t, dir, "the operator mounts the codec certificate's Secret")
	assert.Contains(t, c.Args, "--codec-tls-cert="+filepath.Join(dir, "tls.crt"), "TLS, never plain HTTP off loopback")
	assert.Contains(t, c.Args, "--codec-tls-key="+filepath.Join(dir, "tls.key"))
	assert.False(t, slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--codec-allowed-origins") }),
		"no Web UI origin is assumed: the install names its own (docs/operate.md)")
}

func certificates(t *testing.T) map[string]certificate {
	out := map[string]certificate{}
	for _, o := range objects(t, filepath.Join("manager", "*.yaml"), "Certificate") {
		var c certificate
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o, &c))
		out[c.Metadata.Name] = c
	}
	return out
}

func containerPortNames(d appsv1.Deployment) []string {
	var names []string
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			names = append(names, p.Name)
		}
	}
	return names
}

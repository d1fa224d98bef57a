package devenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The users dev's kube-state-metrics and Prometheus run as: client
// certificates of the API server's CA, with only the rights of
// MonitoringClusterRoles (never the admin kubeconfig).
const (
	KubeStateMetricsUser = "remedy-dev:kube-state-metrics"
	PrometheusUser       = "remedy-dev:prometheus"
)

// ksmResources are the kinds kube-state-metrics exports: what the standard
// alerts read (Pods, Deployments) and their owners and places. Fewer kinds
// are fewer watches and series.
var ksmResources = []string{"pods", "deployments", "replicasets", "statefulsets", "daemonsets", "nodes", "namespaces"}

// MonitoringClusterRoles are the rights of KubeStateMetricsUser (list and
// watch what it exports) and PrometheusUser (the API server's /metrics, and
// through the kubelet's Webhook authorization nodes/metrics, which covers
// /metrics, /metrics/cadvisor and /metrics/probes: not nodes/proxy, so no
// exec, logs or Pod listing).
func MonitoringClusterRoles() map[string][]rbacv1.PolicyRule {
	return map[string][]rbacv1.PolicyRule{
		KubeStateMetricsUser: {
			{APIGroups: []string{""}, Resources: []string{"pods", "nodes", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "statefulsets", "daemonsets"}, Verbs: []string{"list", "watch"}},
		},
		PrometheusUser: {
			{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}},
		},
	}
}

// monitoringIDs are the files the two identities use.
type monitoringIDs struct {
	ksmKubeconfig         string
	certFile, keyFile     string
	apiCAFile, apiAddress string
}

// monitoringIdentities creates each user's ClusterRole and binding (or
// keeps them, on a resumed state directory) and writes kube-state-metrics's
// kubeconfig and Prometheus's client certificate into dir.
func (e *Env) monitoringIdentities(ctx context.Context, dir string) (monitoringIDs, error) {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return monitoringIDs{}, fmt.Errorf("build client: %w", err)
	}
	for user, rules := range MonitoringClusterRoles() {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			_, err = cs.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{})
		} else if err != nil {
			return monitoringIDs{}, fmt.Errorf("create ClusterRole %s: %w", user, err)
		}
		_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return monitoringIDs{}, fmt.Errorf("bind ClusterRole %s: %w", user, err)
		}
	}
	ksm, err := e.Kube.AddUser(envtest.User{Name: KubeStateMetricsUser}, nil)
	if err != nil {
		return monitoringIDs{}, fmt.Errorf("add user %s: %w", KubeStateMetricsUser, err)
	}
	kc, err := ksm.KubeConfig()
	if err != nil {
		return monitoringIDs{}, fmt.Errorf("render kubeconfig of %s: %w", KubeStateMetricsUser, err)
	}
	prom, err := e.Kube.AddUser(envtest.User{Name: PrometheusUser}, nil)
	if err != nil {
		return monitoringIDs{}, fmt.Errorf("add user %s: %w", PrometheusUser, err)
	}
	api, err := url.Parse(e.Config.Host)
	if err != nil {
		return monitoringIDs{}, fmt.Errorf("parse API server address: %w", err)
	}
	ids := monitoringIDs{ksmKubeconfig: filepath.Join(dir, "kube-state-metrics.kubeconfig"),
		certFile: filepath.Join(dir, "prometheus.crt"), keyFile: filepath.Join(dir, "prometheus.key"),
		apiCAFile: filepath.Join(dir, "apiserver-ca.crt"), apiAddress: api.Host}
	ca := e.Config.CAData
	if len(ca) == 0 && e.Config.CAFile != "" {
		if ca, err = os.ReadFile(e.Config.CAFile); err != nil {
			return monitoringIDs{}, fmt.Errorf("read API server CA: %w", err)
		}
	}
	cfg := prom.Config()
	return ids, writeFiles(map[string][]byte{ids.ksmKubeconfig: kc, ids.certFile: cfg.CertData, ids.keyFile: cfg.KeyData, ids.apiCAFile: ca})
}

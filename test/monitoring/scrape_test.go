package monitoring

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/harness"
)

// Every job kubernetes-mixin's rules select is scraped, as its own
// least-privilege user: kube-state-metrics, the API server, and the kubelet's
// /metrics, /metrics/cadvisor and /metrics/probes.
func TestEveryJobIsScraped(t *testing.T) {
	type target struct {
		Labels    map[string]string `json:"labels"`
		Health    string            `json:"health"`
		LastError string            `json:"lastError"`
	}
	var targets []target
	up := func() bool {
		var body struct {
			Data struct {
				ActiveTargets []target `json:"activeTargets"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal([]byte(harness.PrometheusGet(t, "/api/v1/targets?state=active")), &body))
		targets = body.Data.ActiveTargets
		for _, tg := range targets {
			if tg.Health != "up" {
				return false
			}
		}
		return len(targets) == 5
	}
	require.Eventually(t, up, time.Minute, 200*time.Millisecond, "every target up: %+v", &targets)
	var jobs []string
	for _, tg := range targets {
		jobs = append(jobs, tg.Labels["job"]+tg.Labels["metrics_path"])
	}
	slices.Sort(jobs)
	assert.Equal(t, []string{"apiserver", "kube-state-metrics", "kubelet/metrics", "kubelet/metrics/cadvisor", "kubelet/metrics/probes"}, jobs)
}

// Prometheus's certificate, which the kubelet now admits, reads metrics and
// nothing else of the kubelet's: not its Pods, and no exec (nodes/proxy).
func TestPrometheusCannotUseTheKubeletBeyondMetrics(t *testing.T) {
	dir := harness.Monitoring().Dir
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "prometheus.crt"), filepath.Join(dir, "prometheus.key"))
	require.NoError(t, err)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, RootCAs: x509.NewCertPool(),
		// Only who the client is matters here; the kubelet's serving certificate is checked by Prometheus (TestEveryJobIsScraped).
		InsecureSkipVerify: true, //nolint:gosec
	}}}
	kubelet := "https://" + devenv.NodeIP + ":10250"
	for path, want := range map[string]int{
		"/metrics":          http.StatusOK,
		"/metrics/cadvisor": http.StatusOK,
		"/pods":             http.StatusForbidden,
		"/runningpods/":     http.StatusForbidden,
		"/configz":          http.StatusForbidden,
		"/exec/kube-system/x/c?command=id&output=1": http.StatusForbidden,
	} {
		req, err := http.NewRequest(http.MethodGet, kubelet+path, nil)
		require.NoError(t, err)
		if path[:5] == "/exec" {
			req.Method = http.MethodPost
		}
		resp, err := c.Do(req)
		require.NoError(t, err, path)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, path)
	}
}

// kube-state-metrics's identity lists what it exports and reads no Secret.
func TestKubeStateMetricsReadsOnlyWhatItExports(t *testing.T) {
	kc, err := os.ReadFile(filepath.Join(harness.Monitoring().Dir, "kube-state-metrics.kubeconfig"))
	require.NoError(t, err)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	assert.ErrorContains(t, err, "forbidden")
	_, err = cs.CoreV1().Pods("default").Get(ctx, "any", metav1.GetOptions{})
	assert.ErrorContains(t, err, "forbidden", "list and watch only")
}

// The API server's own kubelet client keeps its rights under the kubelet's
// Webhook authorization (system:kubelet-api-admin): a Pod's logs still come
// through the API server.
func TestAPIServerStillReadsPodLogs(t *testing.T) {
	ns := harness.Namespace(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{harness.DemoContainer("web")}}}
	require.NoError(t, harness.Kube().Create(context.Background(), pod))
	harness.Eventually(t, pod, 2*time.Minute, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	cs, err := kubernetes.NewForConfig(harness.Config())
	require.NoError(t, err)
	_, err = cs.CoreV1().Pods(ns).GetLogs("web", &corev1.PodLogOptions{}).DoRaw(context.Background())
	require.NoError(t, err)
}

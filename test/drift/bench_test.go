package drift

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/test/harness"
)

// benchWrites is the number of child updates each side of the overhead
// benchmark makes; benchRequests and benchRate fix the round-trip load.
const (
	benchWrites   = 500
	benchRequests = 500
	benchRate     = 200 // requests per second
)

// ownedJob creates a suspended Job controlled by the Deployment dep, so every
// update of it goes through parent resolution and the full decision.
func ownedJob(b *testing.B, dep *appsv1.Deployment, name string) *batchv1.Job {
	b.Helper()
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: dep.Namespace, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: ptr.To(true),
		}}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Parallelism: ptr.To(int32(1)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
		}}},
	}
	require.NoError(b, harness.Kube().Create(context.Background(), j))
	return j
}

func initializedDeployment(b *testing.B, ns string) *appsv1.Deployment {
	b.Helper()
	d := harness.Deployment(b, ns, "parent", 0)
	return harness.Eventually(b, d, 30*time.Second, func(d *appsv1.Deployment) bool {
		return d.Status.ObservedGeneration == d.Generation && len(d.Status.Conditions) > 0
	})
}

// BenchmarkDriftWriteOverhead compares the API server's write time for child
// updates that the drift webhook judges against the same updates in a
// namespace the webhook skips, interleaved so both see the same machine.
func BenchmarkDriftWriteOverhead(b *testing.B) {
	ctx := context.Background()
	on, off := harness.Namespace(b), harness.Namespace(b)
	require.NoError(b, harness.Kube().Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: off}},
		ctrlclient.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"remedy.dev/drift-webhook":"disabled"}}}`))))
	jobs := []*batchv1.Job{ownedJob(b, initializedDeployment(b, on), "child"), ownedJob(b, initializedDeployment(b, off), "child")}
	var took [2]time.Duration
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for i := 0; i < 2*benchWrites; i++ {
			j := jobs[i%2]
			patch := []byte(fmt.Sprintf(`{"spec":{"parallelism":%d}}`, i%7+2))
			start := time.Now()
			require.NoError(b, harness.Kube().Patch(ctx, j, ctrlclient.RawPatch(types.MergePatchType, patch)))
			took[i%2] += time.Since(start)
		}
	}
	with, without := took[0].Seconds()*1e3/float64(b.N*benchWrites), took[1].Seconds()*1e3/float64(b.N*benchWrites)
	b.ReportMetric(with, "ms/write-webhook")
	b.ReportMetric(without, "ms/write-none")
	b.ReportMetric(with/without, "x-overhead")
}

// BenchmarkDriftAdmissionRoundTrip posts AdmissionReviews straight to the
// webhook over TLS at a fixed rate and reports the latency percentiles.
func BenchmarkDriftAdmissionRoundTrip(b *testing.B) {
	ctx := context.Background()
	ns := harness.Namespace(b)
	job := ownedJob(b, initializedDeployment(b, ns), "child")
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	require.NoError(b, harness.Kube().Get(ctx, ctrlclient.ObjectKey{Name: "remedy-drift"}, &mwc))
	cc := mwc.Webhooks[0].ClientConfig
	pool := x509.NewCertPool()
	require.True(b, pool.AppendCertsFromPEM(cc.CABundle))
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12,
		// The webhook admits only the API server's client certificate.
		Certificates: []tls.Certificate{harness.APIServerClientCert(b)}}}}

	require.NoError(b, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(job), job))
	job.TypeMeta = metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}
	oldRaw, err := json.Marshal(job)
	require.NoError(b, err)
	job.Spec.Parallelism = ptr.To(int32(3))
	newRaw, err := json.Marshal(job)
	require.NoError(b, err)
	var lat []time.Duration
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		tick := time.NewTicker(time.Second / benchRate)
		for i := 0; i < benchRequests; i++ {
			<-tick.C
			review := admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Request: &admissionv1.AdmissionRequest{
					UID: types.UID(fmt.Sprintf("bench-%d-%d", n, i)), Operation: admissionv1.Update,
					Kind:      metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"},
					Resource:  metav1.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"},
					Namespace: ns, Name: job.Name, DryRun: ptr.To(true),
					Object: runtime.RawExtension{Raw: newRaw}, OldObject: runtime.RawExtension{Raw: oldRaw},
				},
			}
			review.Request.UserInfo.Username = "bench-user"
			body, err := json.Marshal(review)
			require.NoError(b, err)
			start := time.Now()
			resp, err := hc.Post(*cc.URL, "application/json", bytes.NewReader(body))
			require.NoError(b, err)
			var out admissionv1.AdmissionReview
			require.NoError(b, json.NewDecoder(resp.Body).Decode(&out))
			resp.Body.Close()
			lat = append(lat, time.Since(start))
			require.NotNil(b, out.Response)
			require.True(b, out.Response.Allowed, "round trip request denied: %+v", out.Response.Result)
		}
		tick.Stop()
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1e3, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1e3, "p99-ms")
}

package execution

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

const gateNS = "remedy-system"

// gatePod is a Job's Pod running as the scale action's account.
func gatePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "remedy-scale-1-abcde", Namespace: gateNS, UID: "pod-uid",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "remedy-scale-1", UID: "job-uid", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{ServiceAccountName: "remedy-action-scale"},
	}
}

// reviewed answers every TokenReview with status, checking the audience asked.
func reviewed(t *testing.T, pod *corev1.Pod, status authnv1.TokenReviewStatus) *fake.Clientset {
	cs := fake.NewClientset(pod)
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		assert.Equal(t, []string{ExecGateAudience}, tr.Spec.Audiences)
		tr.Status = status
		return true, tr, nil
	})
	return cs
}

func boundTo(user string, pod, uid string) authnv1.TokenReviewStatus {
	return authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{ExecGateAudience}, User: authnv1.UserInfo{Username: user,
		Extra: map[string]authnv1.ExtraValue{"authentication.kubernetes.io/pod-name": {pod}, "authentication.kubernetes.io/pod-uid": {uid}}}}
}

func askGate(g *ExecGate, token string) (int, GateAnswer) {
	body, _ := json.Marshal(GateAsk{Request: actions.Request{Action: "scale"}})
	req := httptest.NewRequest(http.MethodPost, ExecGatePath, bytes.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, req)
	var ans GateAnswer
	_ = json.NewDecoder(rec.Body).Decode(&ans)
	return rec.Code, ans
}

// TestExecGateAuthenticatesThePod: only a token of the gate's audience,
// of an action account, bound to a Pod of a Job that runs as that account,
// reaches a run; and only the run that attends the Job answers.
func TestExecGateAuthenticatesThePod(t *testing.T) {
	const scale = "system:serviceaccount:remedy-system:remedy-action-scale"
	notAJob := gatePod()
	notAJob.OwnerReferences = nil
	otherAccount := gatePod()
	otherAccount.Spec.ServiceAccountName = "remedy-action-restart"
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		review authnv1.TokenReviewStatus
		token  string
		attend bool
		code   int
		want   string
	}{
		{"no token", gatePod(), boundTo(scale, "remedy-scale-1-abcde", "pod-uid"), "", true, http.StatusUnauthorized, "bearer token"},
		{"not authenticated for the audience", gatePod(), authnv1.TokenReviewStatus{Error: "invalid audience"}, "t", true, http.StatusUnauthorized, "invalid audience"},
		{"the worker's own token", gatePod(), boundTo("system:serviceaccount:remedy-system:remedy-worker", "remedy-scale-1-abcde", "pod-uid"), "t", true,
			http.StatusForbidden, "not an action's ServiceAccount"},
		{"an action account of another namespace", gatePod(), boundTo("system:serviceaccount:shop:remedy-action-scale", "remedy-scale-1-abcde", "pod-uid"), "t", true,
			http.StatusForbidden, "not an action's ServiceAccount"},
		{"a token bound to no Pod", gatePod(), authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: scale}}, "t", true,
			http.StatusForbidden, "not bound to a Pod"},
		{"a Pod of the same name, recreated", gatePod(), boundTo(scale, "remedy-scale-1-abcde", "old-uid"), "t", true, http.StatusForbidden, "not the one"},
		{"a Pod of another account", otherAccount, boundTo(scale, "remedy-scale-1-abcde", "pod-uid"), "t", true, http.StatusForbidden, "runs as remedy-action-restart"},
		{"a bare Pod", notAJob, boundTo(scale, "remedy-scale-1-abcde", "pod-uid"), "t", true, http.StatusForbidden, "not a Job's"},
		{"no run attends the Job here", gatePod(), boundTo(scale, "remedy-scale-1-abcde", "pod-uid"), "t", false, http.StatusServiceUnavailable, "no run attends"},
		{"the run passes it", gatePod(), boundTo(scale, "remedy-scale-1-abcde", "pod-uid"), "t", true, http.StatusOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &ExecGate{Client: reviewed(t, tc.pod, tc.review), Namespace: gateNS, Wait: 5 * time.Second}
			if tc.attend {
				asks, release := g.attend("job-uid")
				defer release()
				go func() {
					for a := range asks {
						assert.Equal(t, "remedy-action-scale", a.account)
						a.answer <- nil
					}
				}()
			}
			code, ans := askGate(g, tc.token)
			assert.Equal(t, tc.code, code, ans.Message)
			assert.Contains(t, ans.Message, tc.want)
			assert.Equal(t, code == http.StatusOK, ans.Allowed)
			assert.Equal(t, code == http.StatusServiceUnavailable, ans.Retry)
		})
	}
}

// TestJobAnswersOnlyItsOwnWrite: the run answers with the write gate for
// the write its Job was created for; a Pod asking for another write, or
// as another account, is refused without asking the gate.
func TestJobAnswersOnlyItsOwnWrite(t *testing.T) {
	in := testInput("shop")
	in.Request = actions.Request{Action: "scale", Target: in.Request.Target, Params: actionParams(3)}
	for _, tc := range []struct {
		name    string
		ask     podAsk
		gate    error
		want    string
		checked bool
	}{
		{"its own write", podAsk{account: "remedy-action-scale", request: in.Request}, nil, "", true},
		{"its own write, the gate refuses", podAsk{account: "remedy-action-scale", request: in.Request}, errors.New("grant revoked"), "grant revoked", true},
		{"other parameters", podAsk{account: "remedy-action-scale", request: actions.Request{Action: "scale", Target: in.Request.Target, Params: actionParams(30)}},
			nil, "not the write its Job was created for", false},
		{"another account", podAsk{account: "remedy-action-restart", request: in.Request}, nil, "its Job writes as remedy-action-scale", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checks := &countingChecker{err: tc.gate}
			err := (&Jobs{Gate: checks}).answer(context.Background(), in, tc.ask)
			if tc.want == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.want)
			}
			assert.Equal(t, tc.checked, checks.asked == 1)
			if tc.checked {
				assert.Equal(t, in.write(), checks.last, "the gate is asked about the run's own subject and write")
			}
		})
	}
}

type countingChecker struct {
	err   error
	asked int
	last  gate.Write
}

func (c *countingChecker) Check(_ context.Context, w gate.Write) error {
	c.asked++
	c.last = w
	return c.err
}

// TestGateClientWritesOnlyOnAPass: the Pod's client passes only on a 200
// that says so, stops at a refusal, and keeps asking while no run answers.
func TestGateClientWritesOnlyOnAPass(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("pod-token\n"), 0o600))
	for _, tc := range []struct {
		name    string
		answers []GateAnswer
		codes   []int
		want    string // "" : passed
	}{
		{"a pass", []GateAnswer{{Allowed: true}}, []int{200}, ""},
		{"a refusal", []GateAnswer{{Message: "grant revoked"}}, []int{403}, "refused by the write gate: grant revoked"},
		{"no run, then a pass", []GateAnswer{{Retry: true, Message: "no run attends"}, {Allowed: true}}, []int{503, 200}, ""},
		{"allowed, but not a 200", []GateAnswer{{Allowed: true}}, []int{500}, "no run answered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				assert.Equal(t, "Bearer pod-token", r.Header.Get("Authorization"))
				i := min(n, len(tc.answers)-1)
				n++
				reply(w, tc.codes[i], tc.answers[i])
			}))
			defer srv.Close()
			c := GateClient{URL: srv.URL + ExecGatePath, CA: certPEM(srv), TokenFile: token, Wait: 2 * time.Second}
			err := c.Ask(context.Background(), actions.Request{Action: "scale"})
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("no gate configured", func(t *testing.T) {
		var refusal *GateRefusal
		require.ErrorAs(t, GateClient{}.Ask(context.Background(), actions.Request{}), &refusal)
	})
}

func certPEM(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

func actionParams(replicas int32) v1alpha1.ActionParameters {
	return v1alpha1.ActionParameters{Replicas: ptr.To(replicas)}
}

// TestRunCanceledIsNotAWorkerStopping: only a cancellation Temporal sends
// (the run canceled, or gone) deletes the Job; a worker stopping leaves it
// to the retry that resumes it elsewhere.
func TestRunCanceledIsNotAWorkerStopping(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause error
		want  bool
	}{
		{"run canceled", temporal.NewCanceledError(), true},
		{"workflow gone", serviceerror.NewNotFound("workflow execution already completed"), true},
		{"worker stopping", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(tc.cause)
			assert.Equal(t, tc.want, runCanceled(ctx))
		})
	}
}

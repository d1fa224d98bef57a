package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/remedy-dev/remedy/internal/actions"
)

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create

// The exec gate: a job executor's Pod writes as the action's ServiceAccount,
// whenever the kubelet starts it, so the write gate's answer at the Job's
// creation may be stale by then. The Pod asks again, immediately before its
// write, over HTTPS with a token only this gate accepts; the run that
// created the Job answers with the write gate, for the subject it was
// started for (never what the Pod says), and only while it runs.
const (
	// ExecGateAudience is the audience of the projected token the Pod asks
	// with: the API server accepts it for nothing else.
	ExecGateAudience = "remedy-exec-gate"
	// ExecGatePath is where the worker serves the exec gate.
	ExecGatePath = "/exec-gate"
	// ExecGateURLEnv and ExecGateCAEnv tell the Pod where to ask and which CA
	// the gate's certificate is signed by (PEM).
	ExecGateURLEnv = "REMEDY_EXEC_GATE_URL"
	ExecGateCAEnv  = "REMEDY_EXEC_GATE_CA"
	// ExecGateTokenDir holds the projected token (file "token").
	ExecGateTokenDir = "/var/run/secrets/remedy.dev/exec-gate"
	// execGateTokenSeconds is the shortest expiry the API server allows; the
	// kubelet renews the file before it expires.
	execGateTokenSeconds = 600
	// serviceAccountUser prefixes a ServiceAccount's user name.
	serviceAccountUser = "system:serviceaccount:"
)

// ExecGate serves the exec gate: it authenticates the asking Pod and hands
// its question to the RunJob attempt that attends the Pod's Job on this
// worker. It answers nothing itself.
type ExecGate struct {
	// Client is the worker's own identity: it reviews tokens and reads the Pods.
	Client kubernetes.Interface
	// Namespace holds the Jobs and the action ServiceAccounts.
	Namespace string
	// URL is where the executor Pods reach this gate, CA the PEM of the CA
	// that signs its serving certificate. Without a URL no Job is created.
	URL string
	CA  string
	// Wait bounds how long an ask waits for its run's answer (default 30s).
	Wait time.Duration

	mu   sync.Mutex
	runs map[types.UID]chan podAsk
}

// GateAsk is what a Pod sends: the write it is about to make.
type GateAsk struct {
	Request actions.Request `json:"request"`
}

// GateAnswer is the gate's reply. Retry: no run attends the Pod's Job on
// this worker (yet); ask again, another replica may hold it.
type GateAnswer struct {
	Allowed bool   `json:"allowed"`
	Retry   bool   `json:"retry,omitempty"`
	Message string `json:"message,omitempty"`
}

// podAsk is one authenticated ask, handed to the run that attends its Job.
type podAsk struct {
	pod     string
	account string
	request actions.Request
	answer  chan error
}

func (g *ExecGate) wait() time.Duration {
	if g.Wait <= 0 {
		return 30 * time.Second
	}
	return g.Wait
}

// attend routes the asks of job's Pod to the caller until release.
func (g *ExecGate) attend(job types.UID) (asks <-chan podAsk, release func()) {
	ch := make(chan podAsk)
	g.mu.Lock()
	if g.runs == nil {
		g.runs = map[types.UID]chan podAsk{}
	}
	g.runs[job] = ch
	g.mu.Unlock()
	return ch, func() {
		g.mu.Lock()
		if g.runs[job] == ch {
			delete(g.runs, job)
		}
		g.mu.Unlock()
	}
}

func (g *ExecGate) attending(job types.UID) chan podAsk {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runs[job]
}

// ServeHTTP answers POST ExecGatePath with a GateAnswer.
func (g *ExecGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		reply(w, http.StatusMethodNotAllowed, GateAnswer{Message: "POST the write you are about to make"})
		return
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		reply(w, http.StatusUnauthorized, GateAnswer{Message: "ask with the Pod's " + ExecGateAudience + " token as a bearer token"})
		return
	}
	var ask GateAsk
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&ask); err != nil {
		reply(w, http.StatusBadRequest, GateAnswer{Message: fmt.Sprintf("decode the ask: %v", err)})
		return
	}
	a, job, status, err := g.identify(r.Context(), token)
	if err != nil {
		reply(w, status, GateAnswer{Retry: status == http.StatusServiceUnavailable, Message: err.Error()})
		return
	}
	a.request = ask.Request
	runs := g.attending(job)
	if runs == nil {
		reply(w, http.StatusServiceUnavailable, GateAnswer{Retry: true, Message: fmt.Sprintf("no run attends the Job of Pod %s on this worker", a.pod)})
		return
	}
	timer := time.NewTimer(g.wait())
	defer timer.Stop()
	select {
	case runs <- a:
	case <-timer.C:
		reply(w, http.StatusServiceUnavailable, GateAnswer{Retry: true, Message: "the run did not take the ask in time"})
		return
	case <-r.Context().Done():
		return
	}
	select {
	case err := <-a.answer:
		if err != nil {
			reply(w, http.StatusForbidden, GateAnswer{Message: err.Error()})
			return
		}
		reply(w, http.StatusOK, GateAnswer{Allowed: true})
	case <-timer.C:
		reply(w, http.StatusServiceUnavailable, GateAnswer{Retry: true, Message: "the run did not answer in time"})
	case <-r.Context().Done():
	}
}

// identify reviews token (it must be an action account's, bound to this
// gate's audience and to a Pod) and returns the Pod's ask and its Job's UID,
// or the status to refuse with.
func (g *ExecGate) identify(ctx context.Context, token string) (podAsk, types.UID, int, error) {
	tr, err := g.Client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{ExecGateAudience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return podAsk{}, "", http.StatusServiceUnavailable, fmt.Errorf("review the token: %w", err)
	}
	if !tr.Status.Authenticated {
		return podAsk{}, "", http.StatusUnauthorized, fmt.Errorf("the token is not valid for audience %s: %s", ExecGateAudience, tr.Status.Error)
	}
	user := tr.Status.User
	account, ok := strings.CutPrefix(user.Username, serviceAccountUser+g.Namespace+":")
	if !ok || !strings.HasPrefix(account, actions.ServiceAccountName("")) {
		return podAsk{}, "", http.StatusForbidden, fmt.Errorf("%s is not an action's ServiceAccount in %s", user.Username, g.Namespace)
	}
	podName, podUID := user.Extra["authentication.kubernetes.io/pod-name"], user.Extra["authentication.kubernetes.io/pod-uid"]
	if len(podName) != 1 || len(podUID) != 1 {
		return podAsk{}, "", http.StatusForbidden, errors.New("the token is not bound to a Pod")
	}
	pod, err := g.Client.CoreV1().Pods(g.Namespace).Get(ctx, podName[0], metav1.GetOptions{})
	if err != nil {
		return podAsk{}, "", http.StatusServiceUnavailable, fmt.Errorf("read Pod %s: %w", podName[0], err)
	}
	owner := metav1.GetControllerOf(pod)
	switch {
	case string(pod.UID) != podUID[0]:
		return podAsk{}, "", http.StatusForbidden, fmt.Errorf("Pod %s is not the one the token is bound to", pod.Name)
	case pod.Spec.ServiceAccountName != account:
		return podAsk{}, "", http.StatusForbidden, fmt.Errorf("Pod %s runs as %s, not %s", pod.Name, pod.Spec.ServiceAccountName, account)
	case owner == nil || owner.Kind != "Job" || owner.APIVersion != "batch/v1":
		return podAsk{}, "", http.StatusForbidden, fmt.Errorf("Pod %s is not a Job's", pod.Name)
	}
	return podAsk{pod: pod.Name, account: account, answer: make(chan error, 1)}, owner.UID, 0, nil
}

func reply(w http.ResponseWriter, status int, a GateAnswer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(a)
}

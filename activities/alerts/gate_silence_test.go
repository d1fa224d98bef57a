package alerts

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	ctrlfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/activities/internal/activitytest"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/alertrule"
)

// fakeAlertmanager holds the firing alerts it is given and records every
// silence posted or expired.
type fakeAlertmanager struct {
	mu       sync.Mutex
	firing   []alertmanager.ActiveAlert
	silences map[string]alertmanager.Silence
	writes   []string
}

func (f *fakeAlertmanager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v2/alerts":
		_ = json.NewEncoder(w).Encode(f.firing)
	case r.Method == http.MethodGet && r.URL.Path == "/api/v2/silences":
		out := []alertmanager.Silence{}
		for _, s := range f.silences {
			out = append(out, s)
		}
		_ = json.NewEncoder(w).Encode(out)
	case r.Method == http.MethodPost && r.URL.Path == "/api/v2/silences":
		var s alertmanager.Silence
		_ = json.NewDecoder(r.Body).Decode(&s)
		if s.ID == "" {
			s.ID = "s" + string(rune('a'+len(f.silences)))
		}
		f.silences[s.ID] = s
		f.writes = append(f.writes, "post "+s.ID)
		_ = json.NewEncoder(w).Encode(map[string]string{"silenceID": s.ID})
	case strings.HasPrefix(r.URL.Path, "/api/v2/silence/"):
		id := strings.TrimPrefix(r.URL.Path, "/api/v2/silence/")
		s, ok := f.silences[id]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if r.Method == http.MethodDelete {
			f.writes = append(f.writes, "expire "+id)
			s.Status = &struct {
				State string `json:"state"`
			}{"expired"}
			f.silences[id] = s
			return
		}
		_ = json.NewEncoder(w).Encode(s)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// silenceFixture: rule shop/r (silence on, 1m; author alice, whose grant
// allowed says) restarts the Deployment its alert's deployment label names.
func silenceFixture(t *testing.T, allowed *bool) (*Alerts, *fakeAlertmanager) {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	rule := &v1alpha1.RemediationRule{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "r", UID: "rule-uid"}, Spec: v1alpha1.RemediationRuleSpec{
		Matchers: []string{`alertname="Latency"`},
		Author:   &v1alpha1.Requester{Username: "alice"},
		Silence:  &v1alpha1.SilenceSpec{Enabled: true, Duration: v1alpha1.DurationOf(time.Minute)},
		Template: v1alpha1.RemediationTemplate{Steps: []v1alpha1.RemediationStep{{Name: "restart", Execution: v1alpha1.KubernetesExecutionSpec{
			Action: "restart", Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "{{ .Labels.deployment }}"}}}}},
	}}
	kube := kubefake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}})
	kube.PrependReactor("create", "subjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authorizationv1.SubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: *allowed}}, nil
	})
	mapper := apimeta.NewDefaultRESTMapper(nil)
	mapper.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), apimeta.RESTScopeNamespace)
	am := &fakeAlertmanager{silences: map[string]alertmanager.Silence{}}
	srv := httptest.NewServer(am)
	t.Cleanup(srv.Close)
	amc := &alertmanager.Client{URL: srv.URL}
	gate := &gate.Gate{Subjects: ctrlfake.NewClientBuilder().WithScheme(s).WithObjects(rule).Build(), Alertmanager: amc,
		Checks: &gate.Validation{Kube: kube, Mapper: mapper}}
	return &Alerts{Alertmanager: amc, Gate: gate, TaskQueue: activitytest.TestTaskQueue}, am
}

// asAlertWorkflow runs one activity of a, once, under workflow ID id.
func asAlertWorkflow(t *testing.T, a *Alerts, id string, activityFn, in any) (string, error) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterActivity(a)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) (string, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		var out string
		err := workflow.ExecuteActivity(ctx, activityFn, in).Get(ctx, &out)
		return out, err
	}, workflow.RegisterOptions{Name: "alert-test"})
	env.ExecuteWorkflow("alert-test")
	var out string
	if err := env.GetWorkflowError(); err != nil {
		return "", err
	}
	require.NoError(t, env.GetWorkflowResult(&out))
	return out, nil
}

func TestSilenceGate(t *testing.T) {
	shop := map[string]string{"alertname": "Latency", "namespace": "shop", "deployment": "web"}
	bank := map[string]string{"alertname": "Latency", "namespace": "bank", "deployment": "web"}
	noNamespace := map[string]string{"alertname": "Latency", "deployment": "web"}
	subject := func(l map[string]string) gate.AlertSubject {
		return gate.AlertSubject{Namespace: "shop", Rule: "r", Alert: alertrule.Alert{Labels: l, Fingerprint: alertmanager.Fingerprint(l)}}
	}
	idOf := func(l map[string]string) string {
		return v1alpha1.AlertWorkflowID("shop", "r", alertmanager.Fingerprint(l))
	}
	for _, tc := range []struct {
		name     string
		labels   map[string]string
		id       string
		duration time.Duration
		revoked  bool
		notFired bool
		reason   string
	}{
		{name: "the rule's own alert, within its duration", labels: shop, duration: 30 * time.Second},
		{name: "another namespace's alert", labels: bank, duration: 30 * time.Second, reason: v1alpha1.ReasonSubjectMismatch},
		{name: "labels without a namespace", labels: noNamespace, duration: 30 * time.Second, reason: v1alpha1.ReasonSubjectMismatch},
		{name: "longer than the rule's duration", labels: shop, duration: 24 * time.Hour, reason: v1alpha1.ReasonSubjectMismatch},
		{name: "the author lost the grant", labels: shop, duration: 30 * time.Second, revoked: true, reason: v1alpha1.ReasonForbidden},
		{name: "an alert that does not fire", labels: shop, duration: 30 * time.Second, notFired: true, reason: v1alpha1.ReasonSubjectMismatch},
		{name: "another workflow", labels: shop, id: "alert/shop/r/other", duration: 30 * time.Second, reason: v1alpha1.ReasonSubjectMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			allowed := !tc.revoked
			a, am := silenceFixture(t, &allowed)
			// Every run here holds its guard's permit: what the gate checks is the silence.
			a.Guard = guardHolding{idOf(shop), idOf(bank), idOf(noNamespace), "alert/shop/r/other"}
			if !tc.notFired {
				am.firing = []alertmanager.ActiveAlert{{Fingerprint: alertmanager.Fingerprint(tc.labels), Labels: tc.labels}}
			}
			id := tc.id
			if id == "" {
				id = idOf(tc.labels)
			}
			sid, err := asAlertWorkflow(t, a, id, a.HoldSilence, SilenceInput{Subject: subject(tc.labels), Duration: tc.duration})
			if tc.reason != "" {
				var app *temporal.ApplicationError
				require.ErrorAs(t, err, &app)
				assert.Equal(t, tc.reason, app.Type(), err.Error())
				assert.True(t, app.NonRetryable(), "refusals are permanent")
				assert.Empty(t, am.writes, "nothing posted")
				return
			}
			require.NoError(t, err)
			require.Equal(t, []string{"post " + sid}, am.writes)
			got := am.silences[sid]
			assert.Equal(t, alertmanager.EqualMatchers(shop), got.Matchers)
			assert.WithinDuration(t, time.Now().Add(tc.duration), got.EndsAt, 10*time.Second)
		})
	}
}

// A run expires only a silence Remedy made for its own rule, workflow and run.
func TestSilenceGateExpiresOnlyTheRunsOwn(t *testing.T) {
	allowed := true
	a, am := silenceFixture(t, &allowed)
	l := map[string]string{"alertname": "Latency", "namespace": "shop", "deployment": "web"}
	id := v1alpha1.AlertWorkflowID("shop", "r", alertmanager.Fingerprint(l))
	_, prefix := gate.SilenceComment("shop", "r", id, "")
	am.silences["person"] = alertmanager.Silence{ID: "person", CreatedBy: "oncall-alice", Comment: prefix + "run x"}
	am.silences["other-rule"] = alertmanager.Silence{ID: "other-rule", CreatedBy: alertmanager.SilenceCreator, Comment: "Remedy is remediating this alert: RemediationRule shop/q, workflow alert/shop/q/x, run y"}
	am.silences["earlier-run"] = alertmanager.Silence{ID: "earlier-run", CreatedBy: alertmanager.SilenceCreator, Comment: prefix + "run-1"}
	am.silences["mine"] = alertmanager.Silence{ID: "mine", CreatedBy: alertmanager.SilenceCreator, Comment: prefix + activitytest.TestRunID}
	for _, sid := range []string{"person", "other-rule", "earlier-run"} {
		_, err := asAlertWorkflow(t, a, id, a.EndSilence, sid)
		var app *temporal.ApplicationError
		require.ErrorAs(t, err, &app, sid)
		assert.Equal(t, v1alpha1.ReasonSubjectMismatch, app.Type())
	}
	assert.Empty(t, am.writes)
	_, err := asAlertWorkflow(t, a, id, a.EndSilence, "mine")
	require.NoError(t, err)
	assert.Equal(t, []string{"expire mine"}, am.writes)
}

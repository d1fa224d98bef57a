package alerts

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/alerts"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/alertrule"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// rogueWorkflow is a workflow of the attacker's own, on the attacker's own
// task queue: each "hold" or "end" update schedules Remedy's HoldSilence or
// EndSilence on Remedy's task queue with the input the attacker chose.
func rogueWorkflow(ctx workflow.Context) error {
	ao := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: workflows.TaskQueue, StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
	if err := workflow.SetUpdateHandler(ctx, "hold", func(ctx workflow.Context, in alerts.SilenceInput) (string, error) {
		var id string
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, workflow.GetActivityOptions(ao)), "HoldSilence", in).Get(ctx, &id)
		return id, err
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, "end", func(ctx workflow.Context, id string) error {
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, workflow.GetActivityOptions(ao)), "EndSilence", id).Get(ctx, nil)
	}); err != nil {
		return err
	}
	return workflow.Await(ctx, func() bool { return false })
}

// rogue starts the attacker's workflow under id (an alert workflow's ID,
// which anyone who reaches Temporal may choose) on its own task queue.
func rogue(t *testing.T, queue, id string) {
	t.Helper()
	ctx := context.Background()
	run, err := harness.Temporal().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, "RogueSilence")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = harness.Temporal().TerminateWorkflow(context.Background(), id, run.GetRunID(), "test over")
	})
	holdPermit(t, id, run.GetRunID())
}

// holdPermit has the guard of the alert's namespace grant the run a permit,
// as the run's own acquire would: this rogue holds Remedy's keys, so what
// refuses it below is the write gate itself. Without a permit the permit
// check refuses first (TestRogueRunUnderAClosedAlertRunSilencesNothing).
func holdPermit(t *testing.T, id, runID string) {
	t.Helper()
	ctx := context.Background()
	ns := strings.Split(id, "/")[1]
	gid := v1alpha1.AlertGuardWorkflowID(ns)
	_, err := harness.Temporal().SignalWithStartWorkflow(ctx, gid, workflows.SignalAcquire,
		alerts.GuardAcquire{AlertID: id, RunID: runID, Rule: "rogue", Target: id, MaxConcurrent: 2, Slots: 2},
		client.StartWorkflowOptions{ID: gid, TaskQueue: workflows.TaskQueue}, "AlertGuardWorkflow", map[string]any{"state": map[string]any{"namespace": ns}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		v, err := harness.Temporal().QueryWorkflow(ctx, gid, "", workflows.QueryStatus)
		if err != nil {
			return false
		}
		var st workflows.GuardState
		require.NoError(t, v.Get(&st))
		for _, r := range st.Running {
			if r.AlertID == id && r.RunID == runID {
				return true
			}
		}
		return false
	}, 20*time.Second, 100*time.Millisecond, "the guard grants %s a permit", id)
}

// ask sends one update to the rogue workflow id and returns its answer.
func ask(t *testing.T, id, update string, arg any) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := harness.Temporal().UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: update, Args: []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	var out string
	if update == "end" {
		return "", h.Get(ctx, nil)
	}
	err = h.Get(ctx, &out)
	return out, err
}

// refusedAs requires err to be the gate's refusal of type reason.
func refusedAs(t *testing.T, err error, reason string) {
	t.Helper()
	require.Error(t, err)
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "an application error: %v", err)
	assert.Equal(t, reason, app.Type(), err.Error())
}

// silencesNaming lists every silence in Alertmanager whose comment names s
// or one of whose matchers has value s.
func silencesNaming(t *testing.T, s string) []amSilence {
	t.Helper()
	resp, err := harness.Alertmanager().Client().Get(harness.Alertmanager().URL + "/api/v2/silences")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var all []amSilence
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&all))
	var out []amSilence
	for _, sil := range all {
		hit := strings.Contains(sil.Comment, s)
		for _, m := range sil.Matchers {
			hit = hit || m.Value == s
		}
		if hit {
			out = append(out, sil)
		}
	}
	return out
}

// A rogue run (a workflow started by anyone who reaches Temporal, under an
// alert's workflow ID, scheduling HoldSilence on Remedy's task queue with
// labels and a duration of its choosing) gets nothing into the real
// Alertmanager: not a silence of another namespace's alerts, not one longer
// than the rule's spec.silence.duration, not one once the rule's author lost
// the grant, and it expires no silence a person made. The same call within
// the rule's bounds, for an alert that fires, while the author holds the
// grant, is silenced: the test sees a silence when there is one.
func TestSilencesPassTheGate(t *testing.T) {
	ns, elsewhere := tenant(t, "web"), harness.Namespace(t)
	r := restartRule(ns, "silencer", "GateSilence")
	r.Spec.Silence = &v1alpha1.SilenceSpec{Enabled: true, Duration: v1alpha1.DurationOf(time.Minute)}
	rule := createRule(t, r)

	queue := "rogue-" + ns
	w := worker.New(harness.Temporal(), queue, worker.Options{})
	w.RegisterWorkflowWithOptions(rogueWorkflow, workflow.RegisterOptions{Name: "RogueSilence"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	// Another namespace's alert, firing, claimed for this rule.
	far := labels(elsewhere, "GateSilence", "deployment", "db")
	fire(t, far)
	farID := v1alpha1.AlertWorkflowID(ns, rule.Name, alertmanager.Fingerprint(far))
	rogue(t, queue, farID)
	_, err := ask(t, farID, "hold", alerts.SilenceInput{Subject: gate.AlertSubject{Namespace: ns, Rule: rule.Name,
		Alert: alertOf(far)}, Duration: 24 * time.Hour})
	refusedAs(t, err, v1alpha1.ReasonSubjectMismatch)
	assert.Empty(t, silencesNaming(t, elsewhere), "no silence reaches the other namespace")

	// This namespace's alert: the rogue holds its workflow ID before it fires.
	near := labels(ns, "GateSilence", "deployment", "web")
	nearID := v1alpha1.AlertWorkflowID(ns, rule.Name, alertmanager.Fingerprint(near))
	rogue(t, queue, nearID)
	fire(t, near)
	hold := alerts.SilenceInput{Subject: gate.AlertSubject{Namespace: ns, Rule: rule.Name, Alert: alertOf(near)}, Duration: 30 * time.Second}

	long := hold
	long.Duration = 24 * time.Hour
	_, err = ask(t, nearID, "hold", long)
	refusedAs(t, err, v1alpha1.ReasonSubjectMismatch)
	assert.Empty(t, silencesNaming(t, nearID), "no silence outlasts the rule's spec.silence.duration")

	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alerts-" + alertAuthor}}
	require.NoError(t, harness.Kube().Get(context.Background(), ctrlclient.ObjectKeyFromObject(binding), binding))
	revoked := binding.DeepCopy()
	require.NoError(t, harness.Kube().Delete(context.Background(), binding))
	_, err = ask(t, nearID, "hold", hold)
	refusedAs(t, err, v1alpha1.ReasonForbidden)
	assert.Empty(t, silencesNaming(t, nearID), "no silence once the author lost the grant")

	revoked.ResourceVersion, revoked.UID = "", ""
	require.NoError(t, harness.Kube().Create(context.Background(), revoked))
	sid, err := ask(t, nearID, "hold", hold)
	require.NoError(t, err, "within the rule's bounds, with the grant, the alert is silenced")
	require.NotEmpty(t, sid)
	s := silence(t, sid)
	assert.Equal(t, "active", s.Status.State)
	got := map[string]string{}
	for _, m := range s.Matchers {
		assert.True(t, m.IsEqual && !m.IsRegex, m.Name)
		got[m.Name] = m.Value
	}
	assert.Equal(t, near, got, "exactly the alert's labels")
	assert.WithinDuration(t, time.Now().Add(30*time.Second), s.EndsAt, 15*time.Second)

	// A person's silence is not the run's to expire.
	theirs := personSilence(t, near)
	refusedAs(t, askEnd(t, nearID, theirs), v1alpha1.ReasonSubjectMismatch)
	assert.Equal(t, "active", silence(t, theirs).Status.State, "a person's silence stays")
	require.NoError(t, askEnd(t, nearID, sid), "the run's own silence it may end")
	assert.Equal(t, "expired", silence(t, sid).Status.State)
	resolve(t, near)
	resolve(t, far)
}

// alertOf is the alert with labels l, as a workflow's input names it.
func alertOf(l map[string]string) alertrule.Alert {
	return alertrule.Alert{Labels: l, Fingerprint: alertmanager.Fingerprint(l), StartsAt: time.Now()}
}

func askEnd(t *testing.T, id, silenceID string) error {
	t.Helper()
	_, err := ask(t, id, "end", silenceID)
	return err
}

// personSilence posts a silence of the labels as a person would, and returns its ID.
func personSilence(t *testing.T, l map[string]string) string {
	t.Helper()
	now := time.Now().UTC()
	body, err := json.Marshal(alertmanager.Silence{Matchers: alertmanager.EqualMatchers(l), StartsAt: now, EndsAt: now.Add(time.Hour),
		CreatedBy: "oncall-alice", Comment: "maintenance"})
	require.NoError(t, err)
	resp, err := harness.Alertmanager().Client().Post(harness.Alertmanager().URL+"/api/v2/silences", "application/json", strings.NewReader(string(body)))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out struct {
		SilenceID string `json:"silenceID"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out.SilenceID
}

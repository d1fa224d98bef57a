package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/reload"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// TestRogueWorkflowCannotRestartAReloadWorkload: while a reload run holds a
// change in its debounce window, a workflow of the attacker's, on its own
// task queue, asks Remedy's worker for the restart now, with the real
// pending data (which the write gate alone would accept), the decline
// record and the verification. It is not the workload's open reload run:
// each call is refused for good (SubjectMismatch) and nothing is written.
// The genuine run still restarts when its window closes.
func TestRogueWorkflowCannotRestartAReloadWorkload(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	reloadPolicy(t, ns, 15*time.Second)
	web := reloadDeployment(t, ns, "web", "prod")
	cm := reloadConfigMap(t, ns, "app", "prod", "v0")
	waitBaseline(t, web, "app")
	gen := openWindow(t, web, cm, "v1")
	applied := web.Spec.Template.Annotations[hashKey("app")]

	id := v1alpha1.ReloadWorkflowID(ns, "Deployment", "web")
	setData(t, cm, "v2")
	var st workflows.ReloadStatus
	waitPending(t, id, func(s workflows.ReloadStatus) bool {
		st = s
		return len(s.Pending) == 1 && s.Pending[0].Hash != applied
	})

	restart := reload.RestartInput{Namespace: ns, Kind: "Deployment", Name: "web", Scope: "prod", Changes: st.Pending,
		RestartedAt: time.Now().UTC().Format(time.RFC3339), Policy: "reload"}
	queue := "rogue-" + ns
	harness.StartRogue(t, queue)
	out := harness.RunRogue(t, queue, "rogue/"+ns,
		harness.RogueCall{Activity: "RestartWorkload", Arg: restart},
		harness.RogueCall{Activity: "VerifyReload", Arg: reload.ChangesInput{Namespace: ns, Kind: "Deployment", Name: "web", Changes: st.Pending}},
		harness.RogueCall{Activity: "DeclineReload", Arg: reload.DeclineInput{Namespace: ns, Kind: "Deployment", Name: "web", Scope: "prod",
			Changes: st.Pending, Request: "forged"}})
	for i, o := range out {
		assert.Equal(t, v1alpha1.ReasonSubjectMismatch, o.Type, "call %d: %s", i, o.Message)
		assert.True(t, o.NonRetryable, "call %d is refused for good", i)
	}
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(web), web))
	assert.Equal(t, gen, web.Generation, "nothing rolled")
	assert.Equal(t, applied, web.Spec.Template.Annotations[hashKey("app")], "the pod template carries the applied data only")
	assert.NotContains(t, web.Annotations, v1alpha1.DeclinedAnnotation, "no decline recorded")

	// The genuine run restarts with the pending data when its window closes.
	waitTemplateHash(t, web, "app", st.Pending[0].Hash)
}

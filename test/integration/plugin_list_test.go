package integration

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/plugin"
	"github.com/remedy-dev/remedy/test/harness"
)

// kubectl remedy pending lists what waits for my approval: requests in
// namespaces where I hold approve, not those I asked for that need another
// approver; kubectl remedy list shows what ran, newest first; both print
// {"items":[...]} with -o json|yaml.
func TestPluginListAndPending(t *testing.T) {
	ns := harness.Namespace(t)
	k, rar := awaitingApproval(t, ns, "list-waiting", time.Hour, 0)
	done := createExecution(t, ns, "list-done", v1alpha1.KubernetesExecutionSpec{
		Action: "scale", Target: target(ns, "web"), Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](3)},
		RollbackWindow: v1alpha1.DurationOf(0),
	})
	waitPhase(t, done, v1alpha1.PhaseCompleted)
	approve := rbacv1.PolicyRule{APIGroups: []string{"remedy.dev"}, Resources: []string{"remediationapprovalrequests"}, Verbs: []string{"get", "list", "approve"}}
	grantRules(t, ns, "carol", approve)
	grantRules(t, ns, "dave", rbacv1.PolicyRule{APIGroups: []string{"remedy.dev"}, Resources: []string{"remediationapprovalrequests"}, Verbs: []string{"get", "list"}})

	out, err := kubectlRemedy(t, ns, "pending", "--as", "carol")
	require.NoError(t, err, out)
	for _, want := range []string{"NAME", "ACTION", "TARGET", "REQUESTER", "REMAINING", "rar/" + rar.Name, "scale", "Deployment/web", "KubernetesExecution/" + k.Name} {
		assert.Contains(t, out, want)
	}
	out, err = kubectlRemedy(t, ns, "pending", "--as", "dave")
	require.NoError(t, err, out)
	assert.Contains(t, out, "No approval requests wait for you.", "dave may read requests but not approve them")
	out, err = kubectlRemedy(t, ns, "pending", "--as", "erin")
	require.NoError(t, err, out)
	assert.Contains(t, out, "No approval requests wait for you.", "erin may neither read nor approve: nothing waits for her, which is not an error")
	grantRules(t, ns, "frank", rbacv1.PolicyRule{APIGroups: []string{"remedy.dev"}, Resources: []string{"remediationapprovalrequests"}, Verbs: []string{"approve"}})
	_, err = kubectlRemedy(t, ns, "pending", "--as", "frank")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "you hold approve there but not list")
	_, err = kubectlRemedy(t, ns, "pending", "-A", "--as", "erin")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "name a namespace where you approve with -n")

	out, err = kubectlRemedy(t, ns, "pending", "-o", "json", "--as", "carol")
	require.NoError(t, err, out)
	var pending struct{ Items []plugin.Pending }
	require.NoError(t, json.Unmarshal([]byte(out), &pending), out)
	require.Len(t, pending.Items, 1)
	p := pending.Items[0]
	assert.Equal(t, rar.Name, p.Name)
	assert.Equal(t, ns, p.Namespace)
	assert.Equal(t, "Deployment/web", p.Target)
	assert.Equal(t, k.Status.WorkflowID, p.WorkflowID)
	assert.True(t, p.RequiredBy.After(time.Now().Add(50*time.Minute)), p.RequiredBy)

	out, err = kubectlRemedy(t, ns, "list", "--today")
	require.NoError(t, err, out)
	for _, want := range []string{"kexec/list-waiting", "WaitingApproval", "kexec/list-done", "Completed", "Succeeded", "Deployment/web"} {
		assert.Contains(t, out, want)
	}
	out, err = kubectlRemedy(t, ns, "list", "-o", "yaml")
	require.NoError(t, err, out)
	var runs struct{ Items []plugin.RunRow }
	require.NoError(t, yaml.Unmarshal([]byte(out), &runs), out)
	require.Len(t, runs.Items, 2)
	assert.Equal(t, "list-done", runs.Items[0].Name, "newest first")
	assert.Equal(t, "Completed", runs.Items[0].Phase)
	assert.Equal(t, "list-waiting", runs.Items[1].Name)

	out, err = kubectlRemedy(t, ns, "list", "-o", "table")
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), `--output "table": want json or yaml`)
}

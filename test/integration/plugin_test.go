package integration

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/plugin"
	"github.com/remedy-dev/remedy/test/harness"
)

// kubectlRemedy runs `kubectl remedy args... -n ns` with a cluster-admin
// kubeconfig against the real API server; as adds kubectl's impersonation
// flags (--as USER), as a person with other credentials would.
func kubectlRemedy(t testing.TB, ns string, args ...string) (string, error) {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, harness.WriteKubeconfig(kubeconfig))
	var out bytes.Buffer
	err := plugin.Run(context.Background(), append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...), &out, &out)
	return out.String(), err
}

func TestPluginApproveNeedsTheApproveVerb(t *testing.T) {
	ns := harness.Namespace(t)
	k, rar := awaitingApproval(t, ns, "plugin-approve", time.Hour, 0)
	grant(t, ns, "carol", "approve")
	grant(t, ns, "eve")

	out, err := kubectlRemedy(t, ns, "approve", "kexec", k.Name, "-m", "let me", "--as", "eve")
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), `user "eve" may not decide RemediationApprovalRequest `+ns+"/"+rar.Name)
	assert.Contains(t, err.Error(), `needs the verb "approve"`)
	assert.Equal(t, v1alpha1.PhaseWaitingApproval, queryPhase(t, k.Status.WorkflowID), "the refused decision did nothing")

	// Without any grant RBAC refuses the read first; the plugin says what deciding takes.
	out, err = kubectlRemedy(t, ns, "approve", k.Name, "--as", "mallory")
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), `User "mallory" cannot get resource "remediationapprovalrequests"`)
	assert.Contains(t, err.Error(), `deciding needs the verb "approve"`)

	out, err = kubectlRemedy(t, ns, "approve", "kexec", k.Name, "-m", "ship it", "--as", "carol", "--wait", "1m")
	require.NoError(t, err, out)
	assert.Contains(t, out, "remediationapprovalrequest/"+rar.Name+": Approved requested by carol")
	assert.Contains(t, out, "Approved by carol via kubectl at ")
	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, v1alpha1.ReasonSucceeded, k.Status.Reason)

	out, err = kubectlRemedy(t, ns, "reject", rar.Name, "--as", "carol")
	require.Error(t, err, "a bare NAME is an execution, and that one has no request of its own name")
	assert.Contains(t, err.Error(), `kexec/`+rar.Name+` in namespace "`+ns+`"`)
	out, err = kubectlRemedy(t, ns, "reject", "rar/"+rar.Name, "--as", "carol")
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), "already decided: Approved by carol via kubectl at ")

	out, err = kubectlRemedy(t, ns, "status", "kexec", k.Name)
	require.NoError(t, err, out)
	for _, want := range []string{
		"KubernetesExecution  " + ns + "/" + k.Name,
		"Action:", "scale Deployment " + ns + "/web",
		"Phase:", "Completed (Succeeded)",
		"Workflow:", k.Status.WorkflowID,
		"Web UI:", "http://127.0.0.1:8233/namespaces/default/workflows?query=WorkflowId%3D%27kexec%2F" + ns + "%2Fplugin-approve%2F",
		"Timeline:", "Validating", "WaitingApproval", "ApprovalRequested", "Executing",
		"Validation:", "target", "exists", "policy ",
		"Approval:", rar.Name + ": Approved by carol via kubectl at ", `"ship it"`,
	} {
		assert.Contains(t, out, want)
	}
}

func TestPluginRejectThenWhy(t *testing.T) {
	ns := harness.Namespace(t)
	k, rar := awaitingApproval(t, ns, "plugin-reject", time.Hour, 0)
	grant(t, ns, "carol", "approve")
	out, err := kubectlRemedy(t, ns, "reject", "rar", rar.Name, "-m", "change freeze", "--as", "carol")
	require.NoError(t, err, out)
	assert.Contains(t, out, "Rejected requested by carol")
	k = waitPhase(t, k, v1alpha1.PhaseFailed)
	assert.Equal(t, v1alpha1.ReasonApprovalRejected, k.Status.Reason)

	out, err = kubectlRemedy(t, ns, "why", k.Name)
	require.NoError(t, err, out)
	assert.Contains(t, out, `kexec/plugin-reject in namespace "`+ns+`" failed: ApprovalRejected`)
	assert.Contains(t, out, "Message: rejected by carol via kubectl: change freeze")
	assert.Contains(t, out, "in phase WaitingApproval")
	assert.Contains(t, out, "Failing check: approval "+rar.Name+": Rejected by carol via kubectl at ")
}

func TestPluginApproveRemediationStep(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	spec := scaleSpec(ns, "web", 2)
	spec.Approval = &v1alpha1.ApprovalSpec{Required: true}
	spec.RollbackWindow = v1alpha1.DurationOf(0)
	rr := createRemediation(t, ns, "fix", v1alpha1.RemediationStep{Name: "scale", Execution: spec})

	out, err := kubectlRemedy(t, ns, "approve", "rr", rr.Name)
	require.Eventually(t, func() bool {
		if err == nil {
			return true
		}
		// Until the step asks, the plugin says it does not wait for approval.
		require.Contains(t, err.Error(), "is not waiting for approval")
		out, err = kubectlRemedy(t, ns, "approve", "rr", rr.Name, "-m", "go")
		return err == nil
	}, runTimeout, 200*time.Millisecond, "the plugin never approved: %v", err)
	require.NoError(t, err, out)
	assert.Contains(t, out, "remediationapprovalrequest/fix-scale-approval: Approved requested by ")
	harness.Eventually(t, rr, runTimeout, func(rr *v1alpha1.RemediationRequest) bool { return rr.Status.Phase == v1alpha1.PhaseCompleted })

	out, err = kubectlRemedy(t, ns, "status", "rr", rr.Name)
	require.NoError(t, err, out)
	for _, want := range []string{"RemediationRequest  " + ns + "/fix", "Steps:", "scale", "fix-scale", "KubernetesExecution  " + ns + "/fix-scale", "fix-scale-approval: Approved by "} {
		assert.Contains(t, out, want)
	}
}

func TestPluginRollback(t *testing.T) {
	ns := harness.Namespace(t)
	k := rollbackReady(t, ns, "plugin-undo", 4, time.Hour)

	// Rolling back is authorized for the inverse action at admission.
	grantRules(t, ns, "viewer-vic", createExecutions)
	out, err := kubectlRemedy(t, ns, "rollback", k.Name, "--as", "viewer-vic")
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), `denied the request: rollback: user "viewer-vic" cannot execute resource "actions"`)

	out, err = kubectlRemedy(t, ns, "rollback", "kexec", k.Name, "-m", "error rate doubled", "--wait", "1m")
	require.NoError(t, err, out)
	assert.Contains(t, out, "kubernetesexecution/plugin-undo: rollback requested by ")
	assert.Contains(t, out, "Completed (RolledBack)")
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))

	_, err = kubectlRemedy(t, ns, "rollback", k.Name)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `already requested by`)
	assert.Contains(t, err.Error(), `"error rate doubled"`)
}

func TestPluginWhy(t *testing.T) {
	for _, tc := range []struct {
		name, reason, check string
		frozen              bool
		target              string
	}{
		{name: "not-found", reason: "NotFound", check: "Failing check: target: not found", target: "ghost"},
		{name: "denied", reason: "PolicyDenied", check: "Failing check: policy ", frozen: true, target: "web"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := harness.Namespace(t)
			if tc.frozen {
				// A protected namespace is refused at admission; a policy deny fails the run.
				installPolicy(t, "deny-frozen-why", `package remedy.safety

deny contains "frozen" if input.namespace.labels.freeze == "true"
`)
				labelNamespace(t, ns, map[string]string{"freeze": "true"})
			}
			harness.Deployment(t, ns, "web", 1)
			k := waitPhase(t, createExecution(t, ns, "fail-"+tc.name, scaleSpec(ns, tc.target, 2)), v1alpha1.PhaseFailed)
			require.Equal(t, tc.reason, k.Status.Reason)

			out, err := kubectlRemedy(t, ns, "why", "kexec/"+k.Name)
			require.NoError(t, err, out)
			assert.Contains(t, out, `kexec/`+k.Name+` in namespace "`+ns+`" failed: `+tc.reason)
			assert.Contains(t, out, "Message: "+k.Status.Message)
			assert.Contains(t, out, tc.check)
			assert.Contains(t, out, "in phase Validating")
			assert.Contains(t, out, "Web UI: http://")

			_, err = kubectlRemedy(t, ns, "rollback", k.Name)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "it has ended Failed ("+tc.reason+"), so its rollback window is closed")
			_, err = kubectlRemedy(t, ns, "approve", k.Name)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "is not waiting for approval: it is Failed ("+tc.reason+")")
		})
	}
}

func TestPluginBadInput(t *testing.T) {
	ns := harness.Namespace(t)
	harness.Deployment(t, ns, "web", 1)
	running := waitPhase(t, createExecution(t, ns, "running", v1alpha1.KubernetesExecutionSpec{
		Action: "scale", Target: target(ns, "web"), Parameters: &v1alpha1.ActionParameters{Replicas: ptr.To[int32](2)},
		RollbackWindow: v1alpha1.DurationOf(time.Hour),
	}), v1alpha1.PhaseRollbackReady)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"approve"}, "approve needs the name of a kexec (KubernetesExecution), rr (RemediationRequest) or rar (RemediationApprovalRequest)"},
		{[]string{"status", "kexec"}, "status kexec needs a name: usage: kubectl remedy status [kexec|rr] NAME"},
		{[]string{"status", "deploy", "web"}, `status: unknown kind "deploy": want kexec (KubernetesExecution) or rr (RemediationRequest)`},
		{[]string{"rollback", "rr", "x"}, "rollback does not act on a RemediationRequest"},
		{[]string{"status", "kexec", "nope"}, `"nope" not found in namespace "` + ns + `" (another namespace: -n NAMESPACE)`},
		{[]string{"why", "rr", "nope"}, `"nope" not found in namespace "` + ns + `"`},
		{[]string{"approve", "rar", "nope"}, `"nope" not found in namespace "` + ns + `"`},
		{[]string{"approve", "nope"}, `get kexec/nope: kubernetesexecutions.remedy.dev "nope" not found in namespace "` + ns + `"`},
		{[]string{"approve", "rr", "nope"}, `get rr/nope: remediationrequests.remedy.dev "nope" not found in namespace "` + ns + `"`},
		{[]string{"approve", running.Name}, `kexec/running in namespace "` + ns + `" is not waiting for approval: it is RollbackReady (RollbackAvailable)`},
		{[]string{"why", running.Name, "--wait", "1s"}, "unknown flag: --wait"},
	} {
		out, err := kubectlRemedy(t, ns, tc.args...)
		require.Error(t, err, "%q: %s", tc.args, out)
		assert.Contains(t, err.Error(), tc.want, "%q", tc.args)
	}
	out, err := kubectlRemedy(t, ns, "why", running.Name)
	require.NoError(t, err, out)
	assert.Contains(t, out, `kexec/running in namespace "`+ns+`" has not failed: it is RollbackReady (RollbackAvailable)`)
}

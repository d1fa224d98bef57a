package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRef(t *testing.T) {
	all := []Kind{KindExecution, KindRemediation, KindApproval}
	for _, tc := range []struct {
		args    []string
		kinds   []Kind
		want    Ref
		wantErr string
	}{
		{args: []string{"scale-web"}, kinds: all, want: Ref{KindExecution, "scale-web"}},
		{args: []string{"kexec", "scale-web"}, kinds: all, want: Ref{KindExecution, "scale-web"}},
		{args: []string{"KubernetesExecution", "a"}, kinds: all, want: Ref{KindExecution, "a"}},
		{args: []string{"rr/fix"}, kinds: all, want: Ref{KindRemediation, "fix"}},
		{args: []string{"remediationapprovalrequests.remedy.dev", "x-approval"}, kinds: all, want: Ref{KindApproval, "x-approval"}},
		{args: []string{"fix"}, kinds: []Kind{KindRemediation}, want: Ref{KindRemediation, "fix"}},
		{args: nil, kinds: all, wantErr: "approve needs the name of a kexec (KubernetesExecution), rr (RemediationRequest) or rar (RemediationApprovalRequest): usage: kubectl remedy approve [kexec|rr|rar] NAME"},
		{args: []string{"kexec"}, kinds: all, wantErr: "approve kexec needs a name"},
		{args: []string{"rr/"}, kinds: all, wantErr: "approve rr needs a name"},
		{args: []string{"deploy", "web"}, kinds: all, wantErr: `approve: unknown kind "deploy": want kexec (KubernetesExecution), rr (RemediationRequest) or rar (RemediationApprovalRequest)`},
		{args: []string{"rar", "x"}, kinds: []Kind{KindExecution}, wantErr: "approve does not act on a RemediationApprovalRequest: want kexec (KubernetesExecution)"},
		{args: []string{"kexec", "a", "b"}, kinds: all, wantErr: "approve takes one object, got 3 arguments"},
	} {
		got, err := ParseRef("approve", tc.args, tc.kinds...)
		if tc.wantErr != "" {
			require.Error(t, err, "%q", tc.args)
			assert.Contains(t, err.Error(), tc.wantErr, "%q", tc.args)
			continue
		}
		require.NoError(t, err, "%q", tc.args)
		assert.Equal(t, tc.want, got, "%q", tc.args)
	}
}

func TestWebUILink(t *testing.T) {
	assert.Equal(t,
		"http://127.0.0.1:8233/namespaces/default/workflows?query=WorkflowId%3D%27kexec%2Fdemo%2Fscale-web%2F1234%27",
		WebUILink("http://127.0.0.1:8233/", "default", "kexec/demo/scale-web/1234"))
}

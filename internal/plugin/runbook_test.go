package plugin

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// An alert's runbook and summary are shown as plain text: a terminal
// escape (a hyperlink, a color, a cleared screen) in them is not passed on.
func TestRunbookIsShownAsPlainText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://runbooks.example/kubepodcrashlooping", "https://runbooks.example/kubepodcrashlooping"},
		{"Pod is\n crash\tlooping.", "Pod is crash looping."},
		{"\x1b]8;;https://phish.example\x1b\\click\x1b]8;;\x1b\\", "]8;;https://phish.example\\click]8;;\\"},
		{"\x1b[2Jcleared", "[2Jcleared"},
	} {
		assert.Equal(t, tc.want, plainText(tc.in))
	}
	var b bytes.Buffer
	writeRunbook(&b, "https://runbooks.example/x", "crash\x07 looping")
	assert.Equal(t, "Summary:\tcrash looping\nRunbook:\thttps://runbooks.example/x\n", b.String())
	b.Reset()
	writeRunbook(&b, "", "")
	assert.Empty(t, b.String(), "nothing for an alert without them")
}

func TestPendingShowsTheRunbook(t *testing.T) {
	var b bytes.Buffer
	writePending(&b, []Pending{{Name: "web-approval", Action: "restart", Target: "Deployment/web", Subject: "RemediationRule/restart-web", Remaining: "9m0s",
		Runbook: "https://runbooks.example/x"}, {Name: "db-approval", Action: "scale", Target: "Deployment/db", Subject: "KubernetesExecution/db", Remaining: "1m0s"}}, false)
	assert.Equal(t, "NAME\tACTION\tTARGET\tREQUESTER\tSUBJECT\tREMAINING\tRUNBOOK\n"+
		"rar/web-approval\trestart\tDeployment/web\t-\tRemediationRule/restart-web\t9m0s\thttps://runbooks.example/x\n"+
		"rar/db-approval\tscale\tDeployment/db\t-\tKubernetesExecution/db\t1m0s\t-\n", b.String())
}

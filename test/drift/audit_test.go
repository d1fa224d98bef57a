package drift

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// driftWebhookName prefixes every audit annotation the drift webhook
// returns (deploy/webhook/drift.yaml).
const driftWebhookName = "drift.remedy.dev"

// auditEvent is the part of an audit.k8s.io/v1 Event the test reads.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Annotations map[string]string `json:"annotations"`
}

// auditEvents reads kube-apiserver's audit log: the events of writes to
// namespace/resource/name carrying the drift webhook's annotations, keyed
// without the webhook's prefix.
func auditEvents(t *testing.T, resource, namespace, name string) []auditEvent {
	t.Helper()
	f, err := os.Open(harness.AuditLogPath())
	require.NoError(t, err)
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
		if e.ObjectRef.Resource != resource || e.ObjectRef.Namespace != namespace || e.ObjectRef.Name != name || e.ObjectRef.Subresource != "" {
			continue
		}
		ours := map[string]string{}
		for k, v := range e.Annotations {
			if key, ok := strings.CutPrefix(k, driftWebhookName+"/"); ok {
				ours[key] = v
			}
		}
		if len(ours) > 0 {
			e.Annotations = ours
			out = append(out, e)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// TestAuditLogRecordsTheDecisions: a person's change (a new origin) and the
// Deployment controller's denied revert (drift in enforce mode) both leave
// kausality's audit annotations in the API server's audit log.
func TestAuditLogRecordsTheDecisions(t *testing.T) {
	f := newFamily(t, kv1.ModeEnforce)
	denied := decisions("drift-denied")
	_, err := f.scale(t, 2)
	require.NoError(t, err)
	waitDecision(t, "drift-denied", denied)

	var person, controller *auditEvent
	require.Eventually(t, func() bool {
		person, controller = nil, nil
		for _, e := range auditEvents(t, "replicasets", f.ns, f.rs.Name) {
			switch {
			case e.Verb == "patch" && !strings.Contains(e.User.Username, "deployment-controller"):
				person = &e
			case strings.Contains(e.User.Username, "deployment-controller") && e.Annotations["decision"] == "denied":
				controller = &e
			}
		}
		return person != nil && controller != nil
	}, 30*time.Second, 200*time.Millisecond, "no audit events with the drift webhook's annotations for %s/%s", f.ns, f.rs.Name)

	trace, err := kv1.ParseTrace(person.Annotations["trace"])
	require.NoError(t, err, "the trace annotation is the object's kausality.io/trace")
	require.Len(t, trace, 1, "a person's change is a new origin")
	assert.Equal(t, person.User.Username, trace[0].User)
	delete(person.Annotations, "trace")
	assert.Equal(t, map[string]string{"decision": "allowed", "drift": "false", "mode": "enforce", "lifecycle-phase": "Initialized"},
		person.Annotations, "the person's change")

	assert.Equal(t, 403, controller.ResponseStatus.Code)
	assert.Equal(t, map[string]string{"decision": "denied", "drift": "true", "mode": "enforce", "lifecycle-phase": "Initialized",
		"drift-resolution": "unresolved"}, controller.Annotations, "the controller's revert")
}

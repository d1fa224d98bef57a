package integration

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/codecserver"
	"github.com/remedy-dev/remedy/internal/compose"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/internal/seal"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/workflows"
)

// webUIOrigin is the Web UI origin the test's codec server admits.
const webUIOrigin = "http://127.0.0.1:8233"

var (
	codecOnce sync.Once
	codecURL  string
)

// codecEndpoint is the codec server as the operator serves it: as
// remedy-operator, with Remedy's payload keys.
func codecEndpoint(t *testing.T) string {
	t.Helper()
	codecOnce.Do(func() {
		ctx := context.Background()
		cfg, err := devenv.ServiceAccountConfig(ctx, harness.Config(), devenv.Namespace, "remedy-operator")
		require.NoError(t, err)
		codecURL, err = compose.ServeCodec(ctx, cfg, harness.Keys(), compose.CodecOptions{Addr: "127.0.0.1:0", AllowedOrigins: []string{webUIOrigin}})
		require.NoError(t, err)
	})
	require.NotEmpty(t, codecURL)
	return codecURL
}

// person is a ServiceAccount of ns and a real token for it.
func person(t *testing.T, ns, name string) (user, token string) {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	require.NoError(t, harness.Kube().Create(ctx, sa))
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrInt64(3600)}}
	require.NoError(t, harness.Kube().SubResource("token").Create(ctx, sa, tr))
	return "system:serviceaccount:" + ns + ":" + name, tr.Status.Token
}

func ptrInt64(v int64) *int64 { return &v }

var payloadField = regexp.MustCompile(`"(?:data|encoding)": "([A-Za-z0-9+/=]+)"`)

// payloadData is every payload's data and encoding in a `temporal workflow
// show --output json`, base64-decoded, one a line.
func payloadData(out string) string {
	var b strings.Builder
	for _, m := range payloadField.FindAllStringSubmatch(out, -1) {
		if d, err := base64.StdEncoding.DecodeString(m[1]); err == nil {
			b.Write(d)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// mayDecode grants user the codec server's decode verb (payload-reader-example.yaml).
func mayDecode(t *testing.T, user string) {
	grantRules(t, "", user, rbacv1.PolicyRule{APIGroups: []string{codecserver.Group}, Resources: []string{codecserver.Resource}, Verbs: []string{codecserver.DecodeVerb}})
}

// temporalCodec runs the real temporal CLI through the codec server, with
// token as its --codec-auth ("" sends none).
func temporalCodec(t *testing.T, token string, args ...string) (string, error) {
	t.Helper()
	args = append(args, "--address", harness.TemporalAddress(), "--namespace", "default", "--codec-endpoint", codecEndpoint(t))
	if token != "" {
		args = append(args, "--codec-auth", "Bearer "+token)
	}
	cmd := exec.Command(os.Getenv("TEMPORAL_CLI"), args...)
	cmd.Env = append(os.Environ(), "TEMPORAL_CODEC_AUTH=", "TEMPORAL_CODEC_ENDPOINT=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var decoders sync.Map

// mayApproveAndDecode lets user decide requests in ns (remedy-approver) and
// decode payloads (remedy-payload-reader), once each.
func mayApproveAndDecode(t *testing.T, ns, user string) {
	t.Helper()
	ctx := context.Background()
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	err := harness.Kube().Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cli-" + user},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "remedy-approver"}, Subjects: subject})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	if _, done := decoders.LoadOrStore(user, true); done {
		return
	}
	err = harness.Kube().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cli-decode-" + user},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "remedy-payload-reader"}, Subjects: subject})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

func refused(kind string) float64 {
	return testutil.ToFloat64(metrics.PayloadsRefused.WithLabelValues(kind))
}

// `temporal workflow update` through the codec server: without a token the
// codec server answers 401 and nothing reaches the run; a person without
// approve is refused by the workflow and the run keeps waiting; an approver
// decides, attributed to the token's user, never the name typed. The CLI
// reads the update's answer through /decode, so its users hold decode too.
func TestTemporalCLIApprovalThroughTheCodecServer(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k, rar := awaitingApproval(t, ns, "scale-codec", time.Hour, 0)
	id := k.Status.WorkflowID
	approver, approverToken := person(t, ns, "approver")
	grant(t, ns, approver, "approve")
	mayDecode(t, approver)
	eve, eveToken := person(t, ns, "eve")
	grant(t, ns, eve)
	mayDecode(t, eve)
	_, readerlessToken := person(t, ns, "readerless")
	decide := []string{"workflow", "update", "execute", "--workflow-id", id, "--name", workflows.UpdateDecide}

	// The CLI retries a failed /encode until its command times out.
	out, err := temporalCodec(t, "", append(decide, "--command-timeout", "5s", "--input", `{"approved":true,"approver":"alice"}`)...)
	require.Error(t, err, out)
	out, err = temporalCodec(t, "forged-token", "workflow", "signal", "--workflow-id", id, "--name", workflows.SignalApprove, "--input", `{"approver":"alice"}`)
	require.Error(t, err, out)
	assert.Contains(t, out, "Unauthorized")
	assert.Zero(t, harness.SignalsReceived(t, id, ""), "nothing was delivered")
	assert.Equal(t, v1alpha1.PhaseWaitingApproval, queryPhase(t, id))

	out, err = temporalCodec(t, eveToken, append(decide, "--input", `{"approved":true,"approver":"alice"}`)...)
	require.Error(t, err, out)
	assert.Contains(t, out, fmt.Sprintf("may not decide RemediationApprovalRequest %s/%s", ns, rar.Name))
	assert.Contains(t, out, eve)
	out, err = temporalCodec(t, eveToken, "workflow", "signal", "--workflow-id", id, "--name", workflows.SignalApprove, "--input", `{"approver":"alice","via":"kubectl"}`)
	require.NoError(t, err, out)
	assertEvents(t, ns, k.Name, "ApproverRefused")
	assert.Equal(t, v1alpha1.PhaseWaitingApproval, queryPhase(t, id), "the run keeps waiting")

	out, err = temporalCodec(t, approverToken, append(decide, "--input", `{"approved":true,"approver":"alice","reason":"checked"}`)...)
	require.NoError(t, err, out)
	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Equal(t, v1alpha1.DecisionApproved, rar.Status.Decision)
	assert.Equal(t, approver, rar.Status.DecidedBy, "the token's user, not the name typed")
	assert.Equal(t, v1alpha1.DecidedViaUpdate, rar.Status.DecidedVia)
	assert.Equal(t, "checked", rar.Status.DecisionMessage)

	// The history, decoded through the codec server, is readable by someone granted decode, and only by them.
	out, err = temporalCodec(t, readerlessToken, "workflow", "show", "--workflow-id", id, "--output", "json", "--command-timeout", "5s")
	assert.NotContains(t, payloadData(out), "checked", "without decode the payloads stay sealed (err %v)", err)
	out, err = temporalCodec(t, approverToken, "workflow", "show", "--workflow-id", id, "--output", "json")
	require.NoError(t, err, out)
	data := payloadData(out)
	assert.Contains(t, data, `"name":"scale-codec"`, "the execution's input is readable")
	assert.Contains(t, data, `"reason":"checked"`, "the decision is readable")
	assert.NotContains(t, data, seal.Encoding, "every payload opened")
}

// A signal through the codec server rejects as the token's user; the
// status and the RAR say who.
func TestTemporalCLISignalThroughTheCodecServer(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t)
	k, rar := awaitingApproval(t, ns, "scale-codec-signal", time.Hour, 0)
	approver, token := person(t, ns, "approver")
	grant(t, ns, approver, "approve")
	out, err := temporalCodec(t, token, "workflow", "signal", "--workflow-id", k.Status.WorkflowID, "--name", workflows.SignalReject,
		"--input", `{"approver":"root","reason":"not now"}`)
	require.NoError(t, err, out)
	k = waitPhase(t, k, v1alpha1.PhaseFailed)
	assert.Equal(t, fmt.Sprintf("rejected by %s via temporal-signal: not now", approver), k.Status.Message)
	require.NoError(t, harness.Kube().Get(ctx, ctrlclient.ObjectKeyFromObject(rar), rar))
	assert.Equal(t, approver, rar.Status.DecidedBy)
	assert.Equal(t, v1alpha1.DecidedViaSignal, rar.Status.DecidedVia)
}

// A person's payload is an approval decision or nothing: as an internal
// signal or a workflow's input it is refused (kind person) before workflow
// code reads it, and changes nothing.
func TestPersonPayloadsSpeakOnlyAsApprovals(t *testing.T) {
	ns := harness.Namespace(t)
	k, _ := awaitingApproval(t, ns, "scale-codec-internal", time.Hour, 0)
	_, token := person(t, ns, "mallory")
	before := refused("person")
	out, err := temporalCodec(t, token, "workflow", "signal", "--workflow-id", k.Status.WorkflowID, "--name", workflows.SignalFinalize, "--input", `{}`)
	require.NoError(t, err, out)
	require.Eventually(t, func() bool { return refused("person") > before }, 20*time.Second, 100*time.Millisecond, "the finalize signal, Remedy's own, is refused")
	assert.Equal(t, v1alpha1.PhaseWaitingApproval, queryPhase(t, k.Status.WorkflowID))

	before = refused("person")
	id := "codec-forged-" + ns
	out, err = temporalCodec(t, token, "workflow", "start", "--workflow-id", id, "--type", "ExecutionWorkflow", "--task-queue", workflows.TaskQueue,
		"--input", fmt.Sprintf(`{"namespace":%q,"name":"forged","uid":"x"}`, ns))
	require.NoError(t, err, out)
	require.Eventually(t, func() bool { return refused("person") > before }, 20*time.Second, 100*time.Millisecond, "the workflow input is refused")
	_ = harness.Temporal().TerminateWorkflow(context.Background(), id, "", "test done")
}

// The Web UI's requests: a preflight from its origin, then /decode with
// the cookie /login set (fetch with credentials: 'include'). Decoded for a
// person granted decode, 403 for one without, 401 with no cookie or from
// another origin.
func TestWebUIDecodesThroughTheCodecServer(t *testing.T) {
	ns := harness.Namespace(t)
	reader, readerToken := person(t, ns, "reader")
	mayDecode(t, reader)
	_, otherToken := person(t, ns, "other")
	base := codecEndpoint(t)
	sealed, err := seal.DataConverter(harness.Keys()).ToPayload(map[string]string{"greeting": "readable"})
	require.NoError(t, err)
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{sealed}})
	require.NoError(t, err)

	browser := func(token string) *http.Client {
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		c := &http.Client{Jar: jar}
		if token != "" {
			resp, err := c.PostForm(base+"/login", url.Values{"token": {token}})
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			// The cookie is Secure: a browser sends it to a loopback origin; the jar does not.
			u, _ := url.Parse(base)
			for _, c2 := range resp.Cookies() {
				c2.Secure = false
				jar.SetCookies(u, []*http.Cookie{c2})
			}
		}
		return c
	}
	decode := func(c *http.Client, origin string) (int, string, http.Header) {
		req, err := http.NewRequest(http.MethodOptions, base+"/decode", nil)
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type,x-namespace")
		pre, err := c.Do(req)
		require.NoError(t, err)
		pre.Body.Close()
		require.Equal(t, http.StatusNoContent, pre.StatusCode)
		req, err = http.NewRequest(http.MethodPost, base+"/decode", strings.NewReader(string(body)))
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Namespace", "default")
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}

	code, out, h := decode(browser(readerToken), webUIOrigin)
	require.Equal(t, http.StatusOK, code, out)
	assert.Equal(t, webUIOrigin, h.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "true", h.Get("Access-Control-Allow-Credentials"))
	var got commonpb.Payloads
	require.NoError(t, protojson.Unmarshal([]byte(out), &got))
	require.Len(t, got.Payloads, 1)
	assert.JSONEq(t, `{"greeting":"readable"}`, string(got.Payloads[0].Data))
	assert.Equal(t, converter.MetadataEncodingJSON, string(got.Payloads[0].Metadata[converter.MetadataEncoding]))

	code, out, _ = decode(browser(otherToken), webUIOrigin)
	assert.Equal(t, http.StatusForbidden, code, out)
	code, out, _ = decode(browser(""), webUIOrigin)
	assert.Equal(t, http.StatusUnauthorized, code, out)
	code, out, h = decode(browser(readerToken), "https://evil.example")
	assert.Equal(t, http.StatusUnauthorized, code, out)
	assert.Empty(t, h.Get("Access-Control-Allow-Origin"))
	assert.NotContains(t, out, "readable")
}

// A rollback through the temporal CLI and the codec server runs only for a
// person who may run the inverse action themselves: the run asks for that
// identity, whatever the body's requester says; a refused one leaves the
// rollback window open with a Warning Event.
func TestTemporalCLIRollbackThroughTheCodecServer(t *testing.T) {
	ns := harness.Namespace(t)
	k := rollbackReady(t, ns, "scale-codec-rollback", 3, time.Hour)
	_, malloryToken := person(t, ns, "mallory")
	out, err := temporalCodec(t, malloryToken, "workflow", "signal", "--workflow-id", k.Status.WorkflowID, "--name", workflows.SignalRollback,
		"--input", `{"requester":"admin","reason":"trust me"}`)
	require.NoError(t, err, out)
	warning := warningEventWith(t, ns, "KubernetesExecution", k.Name, v1alpha1.ReasonMalformedSignal)
	assert.Contains(t, warning.Note, "rollback refused")
	assert.Equal(t, v1alpha1.PhaseRollbackReady, queryPhase(t, k.Status.WorkflowID))
	assert.Equal(t, int32(3), replicasOf(t, ns, "web"), "nothing rolled back")

	oncall, token := person(t, ns, "oncall")
	grantRules(t, ns, oncall, rbacv1.PolicyRule{APIGroups: []string{"remedy.dev"}, Resources: []string{"actions"}, ResourceNames: []string{"scale"}, Verbs: []string{"execute"}})
	out, err = temporalCodec(t, token, "workflow", "signal", "--workflow-id", k.Status.WorkflowID, "--name", workflows.SignalRollback,
		"--input", `{"requester":"admin","reason":"errors up"}`)
	require.NoError(t, err, out)
	k = waitPhase(t, k, v1alpha1.PhaseCompleted)
	assert.Equal(t, v1alpha1.ReasonRolledBack, k.Status.Reason)
	assert.Equal(t, int32(1), replicasOf(t, ns, "web"))
	var asked bool
	for _, tr := range k.Status.PhaseTransitions {
		asked = asked || strings.Contains(tr.Message, "rolling back as requested by "+oncall)
	}
	assert.True(t, asked, "the rollback is attributed to the token's user, not the body's: %+v", k.Status.PhaseTransitions)
}

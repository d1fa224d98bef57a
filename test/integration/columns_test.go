package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
)

// columns reads what `kubectl get <resource> -n ns` prints: the API server's
// table, one map from column name to cell per row.
func columns(t *testing.T, ns, resource string) []map[string]string {
	t.Helper()
	cfg := rest.CopyConfig(harness.Config())
	cfg.GroupVersion, cfg.APIPath = &v1alpha1.GroupVersion, "/apis"
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	require.NoError(t, err)
	body, err := rc.Get().Namespace(ns).Resource(resource).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	require.NoError(t, err, string(body))
	var table metav1.Table
	require.NoError(t, json.Unmarshal(body, &table))
	var rows []map[string]string
	for _, r := range table.Rows {
		row := map[string]string{}
		for i, c := range table.ColumnDefinitions {
			row[c.Name] = fmt.Sprint(r.Cells[i])
		}
		rows = append(rows, row)
	}
	return rows
}

// kubectl get shows kexec TARGET as kind/name, rr STEPS as done/total, and
// rar ACTION, TARGET, REQUESTER and a REMAINING not rounded up past a minute.
func TestPrinterColumns(t *testing.T) {
	ns := harness.Namespace(t)
	k, rar := awaitingApproval(t, ns, "columns", time.Hour, 0)
	rr := createRemediation(t, ns, "columns-rr",
		v1alpha1.RemediationStep{Name: "one", Execution: scaleSpec(ns, "web", 2)},
		v1alpha1.RemediationStep{Name: "two", Execution: scaleSpec(ns, "web", 3)})
	harness.Eventually(t, rr, runTimeout, func(rr *v1alpha1.RemediationRequest) bool { return rr.Status.Phase == v1alpha1.PhaseCompleted })

	byName := func(rows []map[string]string, name string) map[string]string {
		for _, r := range rows {
			if r["Name"] == name {
				return r
			}
		}
		t.Fatalf("no row %s in %v", name, rows)
		return nil
	}
	assert.Equal(t, "Deployment/web", byName(columns(t, ns, "kubernetesexecutions"), "columns")["Target"])
	assert.Equal(t, "2/2", byName(columns(t, ns, "remediationrequests"), "columns-rr")["Steps"])

	var row map[string]string
	require.Eventually(t, func() bool {
		// The operator writes status.target and status.timeRemaining on its first look.
		row = byName(columns(t, ns, "remediationapprovalrequests"), rar.Name)
		_, err := time.ParseDuration(row["Remaining"])
		return err == nil
	}, runTimeout, 100*time.Millisecond, "no remaining time on %s", rar.Name)
	assert.Equal(t, "scale", row["Action"])
	assert.Equal(t, "Deployment/web", row["Target"])
	assert.NotEmpty(t, row["Requester"])
	assert.NotEqual(t, "<nil>", row["Requester"])
	left, err := time.ParseDuration(row["Remaining"])
	require.NoError(t, err, row["Remaining"])
	assert.LessOrEqual(t, left, time.Hour)

	// Started is recorded once per run; the timeline keeps sub-second times,
	// so kubectl remedy status's AFTER is not +0s throughout.
	var events eventsv1.EventList
	require.NoError(t, harness.Kube().List(context.Background(), &events, ctrlclient.InNamespace(ns)))
	started := 0
	for _, e := range events.Items {
		if e.Regarding.Name == k.Name && e.Reason == "Started" {
			started++
		}
	}
	assert.Equal(t, 1, started, "one Started Event")
	trs := k.Status.PhaseTransitions
	require.GreaterOrEqual(t, len(trs), 2)
	assert.True(t, trs[len(trs)-1].Time.After(trs[0].Time.Time), "%v", trs)
	out, err := kubectlRemedy(t, ns, "status", "kexec", k.Name)
	require.NoError(t, err, out)
	assert.Regexp(t, `\+[0-9.]+m?s\s+WaitingApproval`, out)
	assert.NotRegexp(t, `\+0s\s+WaitingApproval`, out)
}

package alerts

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"golang.org/x/sync/errgroup"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/test/harness"
)

// benchGroupWait is the group_wait of the harness's Alertmanager route
// (harness.AlertsOptions' default): every figure below is reported beside it.
const benchGroupWait = time.Second

// BenchmarkAlertToRemediation: an alert posted to Alertmanager's API
// (POST /api/v2/alerts), each in a group of its own so that group_wait
// applies, until the alert's workflow started (the receiver's
// signal-with-start) and until the RemediationRequest's workflow started
// (the rule's remediation), p50 and p95 over 20 alerts, one at a time.
// Start times are Temporal's own (the same clock as the post).
// x-group-wait is the p50 over group_wait: Alertmanager's wait dominates.
func BenchmarkAlertToRemediation(b *testing.B) {
	const samples = 20
	ns := tenant(b)
	for i := range samples {
		harness.Deployment(b, ns, fmt.Sprintf("web-%02d", i), 1)
	}
	rule := restartRule(ns, "latency", "")
	rule.Spec.Matchers = []string{`alertname=~"BenchLatency.*"`}
	createRule(b, rule)
	var toRun, toRemediation []time.Duration
	b.ResetTimer()
	for i := range samples {
		l := labels(ns, fmt.Sprintf("BenchLatency%02d", i), "deployment", fmt.Sprintf("web-%02d", i))
		fp := alertmanager.Fingerprint(l)
		posted := time.Now()
		postTo(b, harness.Alertmanager(), amAlert{Labels: l, StartsAt: posted, EndsAt: posted.Add(time.Hour)})
		toRun = append(toRun, startedAt(b, v1alpha1.AlertWorkflowID(ns, rule.Name, fp), 30*time.Second).Sub(posted))
		toRemediation = append(toRemediation, remediationStartedAt(b, ns, fp, 60*time.Second).Sub(posted))
	}
	b.StopTimer()
	b.ReportMetric(float64(benchGroupWait.Milliseconds()), "group-wait-ms")
	run50, run95 := percentiles(toRun)
	rem50, rem95 := percentiles(toRemediation)
	b.ReportMetric(ms(run50), "p50-ms-to-run")
	b.ReportMetric(ms(run95), "p95-ms-to-run")
	b.ReportMetric(ms(rem50), "p50-ms-to-remediation")
	b.ReportMetric(ms(rem95), "p95-ms-to-remediation")
	b.ReportMetric(float64(run50)/float64(benchGroupWait), "x-group-wait")
	b.ReportMetric(float64(rem50)/float64(benchGroupWait), "x-group-wait-remediation")
}

// BenchmarkAlertThroughput1000: 1,000 distinct alerts (10 alertnames of
// 100, so 10 groups) posted at once to an Alertmanager routed to the
// receiver, until all 1,000 alert workflows exist (the last one's start
// time), against the baseline of the same 1,000 alerts sent straight to
// the receiver as Alertmanager would notify them (10 notifications of 100,
// at once), in the same run. A 503 (Temporal not done within the
// receiver's 8s) is retried by both: Alertmanager with its backoff, the
// baseline after 1s; the receiver does not hand the alerts it already
// handed over to Temporal again (alerts.RedeliveryWindow). The figure is
// the ingestion path: the Alertmanager the worker confirms alerts with
// (the harness's) never holds these, so every run ends at its first check,
// and 1,000 remediations do not compete with the starts. x-direct is the
// ratio of the two rates.
func BenchmarkAlertThroughput1000(b *testing.B) {
	const groups, perGroup = 10, 100
	replica, _ := secondReplica(b)
	direct := burst(b, groups, perGroup, nil)
	viaAM := burst(b, groups, perGroup, replica)
	b.ReportMetric(float64(benchGroupWait.Milliseconds()), "group-wait-ms")
	b.ReportMetric(float64(groups*perGroup)/viaAM.Seconds(), "alerts/s")
	b.ReportMetric(float64(groups*perGroup)/direct.Seconds(), "direct-alerts/s")
	b.ReportMetric(direct.Seconds()/viaAM.Seconds(), "x-direct")
}

// burst sends groups*perGroup distinct alerts matching one rule of a new
// namespace, to the Alertmanager am, or straight to the receiver
// when am is nil, and returns the time from the first post to the
// start of the last alert workflow. It then waits for the runs to end, so
// the next burst has the machine to itself.
func burst(b *testing.B, groups, perGroup int, am *devenv.Alertmanager) time.Duration {
	b.Helper()
	ns := tenant(b, "web")
	rule := restartRule(ns, "burst", "")
	rule.Spec.Matchers = []string{`alertname=~"Burst.*"`}
	createRule(b, rule)
	now := time.Now()
	batches := make([][]amAlert, groups)
	var ids []string
	for i := range groups * perGroup {
		l := labels(ns, fmt.Sprintf("Burst%02d", i%groups), "deployment", "web", "pod", fmt.Sprintf("web-%04d", i))
		batches[i%groups] = append(batches[i%groups], amAlert{Labels: l, StartsAt: now, EndsAt: now.Add(time.Hour)})
		ids = append(ids, v1alpha1.AlertWorkflowID(ns, rule.Name, alertmanager.Fingerprint(l)))
	}
	send := func(batch []amAlert) error {
		postTo(b, am, batch...)
		return nil
	}
	if am == nil {
		send = func(batch []amAlert) error {
			var ls []map[string]string
			for _, a := range batch {
				ls = append(ls, a.Labels)
			}
			for {
				switch code := notify(b, harness.AlertsToken(), message("firing", now, ls...)); code {
				case http.StatusOK:
					return nil
				case http.StatusServiceUnavailable:
					time.Sleep(time.Second) // paces a resend, as Alertmanager does; asserts nothing
				default:
					return fmt.Errorf("receiver answered %d", code)
				}
			}
		}
	}
	start := time.Now()
	var g errgroup.Group
	for _, batch := range batches {
		g.Go(func() error { return send(batch) })
	}
	require.NoError(b, g.Wait())
	query := fmt.Sprintf("RemedyRule = '%s/%s'", ns, rule.Name)
	took := lastStart(b, query, len(ids), 10*time.Minute).Sub(start)
	waitClosed(b, query, 10*time.Minute)
	return took
}

// lastStart waits until n workflows match query and returns the latest start time among them.
func lastStart(b *testing.B, query string, n int, timeout time.Duration) time.Time {
	b.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	require.Eventually(b, func() bool {
		// A saturated server times out a count now and then: ask again.
		c, err := harness.Temporal().CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
		return err == nil && c.GetCount() >= int64(n)
	}, timeout, 100*time.Millisecond, "fewer than %d workflows after %s", n, timeout)
	var last time.Time
	var token []byte
	for {
		page, err := harness.Temporal().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: 1000, NextPageToken: token})
		if err != nil && time.Now().Before(deadline) {
			time.Sleep(time.Second) // paces asking a saturated server again; asserts nothing
			continue
		}
		require.NoError(b, err)
		for _, e := range page.GetExecutions() {
			if s := e.GetStartTime().AsTime(); s.After(last) {
				last = s
			}
		}
		if token = page.GetNextPageToken(); len(token) == 0 {
			return last
		}
	}
}

// waitClosed waits until no workflow matching query is running.
func waitClosed(b *testing.B, query string, timeout time.Duration) {
	b.Helper()
	require.Eventually(b, func() bool {
		c, err := harness.Temporal().CountWorkflow(context.Background(), &workflowservice.CountWorkflowExecutionsRequest{Query: query + " AND ExecutionStatus = 'Running'"})
		return err == nil && c.GetCount() == 0
	}, timeout, time.Second, "workflows still running after %s", timeout)
}

// startedAt waits for the workflow and returns Temporal's start time of its run.
func startedAt(b *testing.B, id string, timeout time.Duration) time.Time {
	b.Helper()
	var started time.Time
	require.Eventually(b, func() bool {
		d, err := harness.Temporal().DescribeWorkflowExecution(context.Background(), id, "")
		if err == nil {
			started = d.GetWorkflowExecutionInfo().GetStartTime().AsTime()
			return true
		}
		var nf *serviceerror.NotFound
		require.ErrorAs(b, err, &nf)
		return false
	}, timeout, 10*time.Millisecond, "workflow %s not started within %s", id, timeout)
	return started
}

// remediationStartedAt waits for the RemediationRequest of the alert and
// returns its workflow's start time.
func remediationStartedAt(b *testing.B, ns, fingerprint string, timeout time.Duration) time.Time {
	b.Helper()
	deadline := time.Now().Add(timeout)
	var rr v1alpha1.RemediationRequest
	require.Eventually(b, func() bool {
		var l v1alpha1.RemediationRequestList
		require.NoError(b, harness.Kube().List(context.Background(), &l, ctrlclient.InNamespace(ns), ctrlclient.MatchingLabels{"remedy.dev/alert": fingerprint}))
		if len(l.Items) == 0 {
			return false
		}
		rr = l.Items[0]
		return true
	}, timeout, 10*time.Millisecond, "no RemediationRequest for alert %s within %s", fingerprint, timeout)
	return startedAt(b, v1alpha1.RemediationWorkflowID(ns, rr.Name, string(rr.UID)), time.Until(deadline))
}

func percentiles(d []time.Duration) (p50, p95 time.Duration) {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*50/100], s[(len(s)-1)*95/100]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

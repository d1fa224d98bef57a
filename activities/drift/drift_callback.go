package drift

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/remedy-dev/remedy/activities/fail"
	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// PostReportInput is one report for one callback URL.
type PostReportInput struct {
	URL    string          `json:"url"`
	Report kv1.DriftReport `json:"report"`
}

// maxResponseBody bounds what is read of a receiver's answer.
const maxResponseBody = 4096

// maxReceiverError bounds the receiver's own error (acknowledged: false)
// that goes into the run's status; a non-2xx body never does.
const maxReceiverError = 200

// PostReport POSTs a DriftReport to one callback URL, once the URL is found
// among those configured for the parent's namespace (DriftConfig) right
// before the POST, and the report is about this workflow's parent: a run
// started or signalled by hand reaches no other address. Server errors,
// timeouts, 408 and 429 are retried; any other 4xx says the receiver will
// never take this report, so it fails for good. A 2xx answer is read as
// kausality's DriftReportResponse: acknowledged: false (the receiver had a
// problem with the report) is retried with the receiver's error; a body that
// is no DriftReportResponse (empty, not JSON) counts as acknowledged, as in
// kausality. Failures name the answer's status only: what a receiver
// writes in a non-2xx body stays out of Temporal.
func (d *Drift) PostReport(ctx context.Context, in PostReportInput) error {
	callback, err := d.Gate.PassCallback(ctx, in.Report.Spec.Parent, in.URL)
	if err != nil {
		return err
	}
	body, err := json.Marshal(in.Report)
	if err != nil {
		return fail.Permanent(v1alpha1.ReasonInvalidParameters, fmt.Errorf("encode drift report %s: %w", in.Report.Spec.ID, err))
	}
	resp, err := callback.Post(ctx, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// Reading a little of the body lets the connection be reused and explains failures.
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		var ack kv1.DriftReportResponse
		if json.Unmarshal(msg, &ack) == nil && !ack.Acknowledged {
			return temporal.NewApplicationError(fmt.Sprintf("drift report %s not acknowledged by %s: %s", in.Report.Spec.ID, in.URL, orNone(sanitize(ack.Error))),
				v1alpha1.ReasonCallbackNotAcknowledged)
		}
		activity.GetLogger(ctx).Info("drift report sent", "url", in.URL, "id", in.Report.Spec.ID, "phase", in.Report.Spec.Phase)
		return nil
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests:
		return fail.Permanent(v1alpha1.ReasonCallbackRejected, fmt.Errorf("post drift report to %s: %s", in.URL, sanitize(resp.Status)))
	default:
		return fmt.Errorf("post drift report to %s: %s", in.URL, sanitize(resp.Status))
	}
}

// sanitize keeps a receiver's text to one short printable line.
func sanitize(s string) string {
	out := strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return ' '
		}
		return r
	}, strings.TrimSpace(s))
	if len(out) > maxReceiverError {
		out = out[:maxReceiverError] + "..."
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "no error given"
	}
	return s
}

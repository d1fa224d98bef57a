package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/drift"
	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

const (
	driftReportDetected = kv1.DriftReportDetected
	driftReportResolved = kv1.DriftReportResolved
)

// reportJob is one report for every callback URL of its drift.
type reportJob struct {
	urls   []string
	report kv1.DriftReport
}

// report queues a report unless the drift is snoozed: a drift detected
// under a snooze has neither report unless it outlives the snooze
// (reportUnsnoozed).
func (r *driftRun) report(d OpenDrift, phase kv1.DriftReportPhase) {
	s := d.Signal
	urls := r.status.Settings.CallbackURLs
	if (s.Snoozed && !d.Unsnoozed) || len(urls) == 0 {
		return
	}
	r.queue = append(r.queue, reportJob{urls: urls, report: DriftReportOf(s, phase)})
}

// reportUnsnoozed reports, once, each open drift detected under a snooze
// that has expired by now (or that a later request saw without one): the
// snooze silenced the drift only for its duration.
func (r *driftRun) reportUnsnoozed(ctx workflow.Context) {
	now := workflow.Now(ctx)
	for i := range r.status.Open {
		d := &r.status.Open[i]
		s := d.Signal
		if !s.Snoozed || d.Unsnoozed || s.SnoozedUntil.IsZero() || now.Before(s.SnoozedUntil) {
			continue
		}
		d.Unsnoozed = true
		workflow.GetLogger(ctx).Info("snooze expired, drift still open", "id", s.ID, "child", s.Child.Target(), "snoozedUntil", s.SnoozedUntil)
		r.report(*d, driftReportDetected)
	}
}

// post sends queued reports one at a time, so a drift's Resolved report
// never overtakes its Detected one, while the main loop keeps handling
// signals; each report goes to all its URLs at once.
func (r *driftRun) post(ctx workflow.Context) {
	actx := workflow.WithActivityOptions(ctx, driftPostOptions)
	for {
		if err := workflow.Await(ctx, func() bool { return len(r.queue) > 0 }); err != nil {
			return
		}
		job := r.queue[0]
		r.queue, r.posting = r.queue[1:], true
		futures := make([]workflow.Future, len(job.urls))
		for i, u := range job.urls {
			futures[i] = workflow.ExecuteActivity(actx, drifts.PostReport, drift.PostReportInput{URL: u, Report: job.report})
		}
		for i, f := range futures {
			if err := f.Get(ctx, nil); err != nil {
				workflow.GetLogger(ctx).Warn("drift report not delivered", "url", job.urls[i], "id", job.report.Spec.ID,
					"phase", job.report.Spec.Phase, "error", err)
				r.undelivered(UndeliveredReport{ID: job.report.Spec.ID, Phase: string(job.report.Spec.Phase), URL: job.urls[i], Error: cause(err)})
			}
		}
		r.posting = false
	}
}

// maxUndelivered bounds the undelivered reports the status keeps.
const maxUndelivered = 20

// undelivered records a report a receiver never took, keeping the latest.
func (r *driftRun) undelivered(u UndeliveredReport) {
	r.status.Undelivered = append(r.status.Undelivered, u)
	if n := len(r.status.Undelivered); n > maxUndelivered {
		r.status.Undelivered = r.status.Undelivered[n-maxUndelivered:]
	}
}

// cause is the activity's own message (the receiver's error when it did not
// acknowledge), without the activity error's wrapping.
func cause(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return err.Error()
}

// DriftReportOf builds the report a signal describes, in the given phase.
func DriftReportOf(s DriftSignal, phase kv1.DriftReportPhase) kv1.DriftReport {
	return kv1.DriftReport{
		APIVersion: kv1.DriftReportAPIVersion,
		Kind:       kv1.DriftReportKind,
		Spec: kv1.DriftReportSpec{
			ID:    s.ID,
			Phase: phase,
			Parent: kv1.DriftObjectReference{APIVersion: s.Parent.APIVersion, Kind: s.Parent.Kind, Namespace: s.Parent.Namespace,
				Name: s.Parent.Name, UID: s.Parent.UID, Generation: s.ParentGeneration,
				ObservedGeneration: s.ParentObservedGeneration, LifecyclePhase: s.ParentLifecyclePhase},
			Child: kv1.DriftObjectReference{APIVersion: s.Child.APIVersion, Kind: s.Child.Kind, Namespace: s.Child.Namespace,
				Name: s.Child.Name, UID: s.Child.UID, Generation: s.ChildGeneration},
			OldObject: s.OldObject,
			NewObject: s.NewObject,
			Request: kv1.DriftRequestContext{User: s.User, Groups: s.Groups, UID: s.RequestUID, FieldManager: s.FieldManager,
				Operation: s.Operation, DryRun: s.DryRun},
		},
	}
}

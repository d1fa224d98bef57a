package seal

import (
	"context"
	"fmt"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// Upgrading from a release that did not seal (v0.1.0): its runs in flight
// have unsealed payloads in their histories, which this release's worker
// replays. With a cutoff (the worker's --payload-unsealed-before, the moment
// the previous release's parts stopped), an unsealed payload is accepted
// only where the previous release put it, which a server-set time proves:
//
//   - in a workflow, while it replays a workflow task that started before the
//     cutoff (workflow.Now is that task's start, taken from the history): the
//     run's input, the signals it received and the results it was handed then;
//   - in an activity, if the server scheduled it before the cutoff (a retry of
//     one the previous release scheduled).
//
// Everything that reaches a run after the cutoff, whenever the run started,
// and every activity scheduled after it, must be sealed. Payloads are always
// sealed when encoded. Without a cutoff nothing unsealed is accepted.
type sealed struct {
	converter.DataConverter // strict
	keys                    *Keyring
	cutoff                  time.Time
}

var (
	_ converter.ContextAware                          = (*sealed)(nil)
	_ converter.DataConverterWithSerializationContext = (*sealed)(nil)
)

// WithWorkflowContext accepts unsealed payloads decoded while ctx's run
// replays what happened before the cutoff. The time is read when a payload
// is decoded, not when the converter is bound (an activity's result is
// decoded tasks after it was scheduled).
func (m *sealed) WithWorkflowContext(ctx workflow.Context) converter.DataConverter {
	if m.cutoff.IsZero() {
		return m
	}
	return converter.NewCodecDataConverter(payloadConverters(), &legacyCodec{Codec: Codec{Keys: m.keys}, accept: func() bool {
		return m.beforeCutoff(ctx)
	}})
}

// WithContext refuses an activity's input that lacks a payload (which no
// codec would see), and accepts unsealed input for an activity scheduled
// before the cutoff.
func (m *sealed) WithContext(ctx context.Context) converter.DataConverter {
	if !activity.IsActivity(ctx) {
		return m
	}
	if !m.cutoff.IsZero() && activity.GetInfo(ctx).ScheduledTime.Before(m.cutoff) {
		return wholeInput{converter.NewCodecDataConverter(payloadConverters(), &legacyCodec{Codec: Codec{Keys: m.keys}, accept: func() bool { return true }})}
	}
	// Strict, whatever run this converter was bound to.
	return wholeInput{converter.NewCodecDataConverter(payloadConverters(), &Codec{Keys: m.keys})}
}

// wholeInput refuses to decode fewer payloads than values: an activity
// scheduled with no input would otherwise run on zero values, sealed by no one.
type wholeInput struct{ converter.DataConverter }

func (w wholeInput) FromPayloads(payloads *commonpb.Payloads, valuePtrs ...any) error {
	if n := len(payloads.GetPayloads()); n < len(valuePtrs) {
		return refuse(RefusedUnsealed, fmt.Sprintf("%d payloads for %d values: a missing payload is not sealed", n, len(valuePtrs)))
	}
	return w.DataConverter.FromPayloads(payloads, valuePtrs...)
}

// WithSerializationContext keeps the migration: sealing does not depend on
// the context, but what the SDK decodes outside workflow code (local
// activity and version markers, side effects, updates) knows its run only
// by workflow ID, so it asks the run Track registered under it.
func (m *sealed) WithSerializationContext(sc converter.SerializationContext) converter.DataConverter {
	wf, ok := sc.(converter.WorkflowSerializationContext)
	if m.cutoff.IsZero() || !ok {
		return m
	}
	id := wf.WorkflowID
	c := *m
	c.DataConverter = converter.NewCodecDataConverter(payloadConverters(), &legacyCodec{Codec: Codec{Keys: m.keys}, accept: func() bool {
		f, ok := replays.Load(id)
		return ok && f.(*replay).before()
	}})
	return &c
}

// replays holds, by workflow ID, the runs started before the cutoff while
// their workflow code runs in this process (Signals.Track).
var replays sync.Map

type replay struct{ before func() bool }

// Track registers ctx's run, when it started before the cutoff, so that what
// the SDK decodes for it outside workflow code follows the migration; the
// returned function unregisters it.
func (s *Signals) Track(ctx workflow.Context) (release func()) {
	if s.UnsealedBefore.IsZero() || !workflow.GetInfo(ctx).WorkflowStartTime.Before(s.UnsealedBefore) {
		return func() {}
	}
	m := &sealed{cutoff: s.UnsealedBefore}
	r := &replay{before: func() bool { return m.beforeCutoff(ctx) }}
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	replays.Store(id, r)
	return func() { replays.CompareAndDelete(id, r) }
}

// beforeCutoff says whether ctx's run is replaying a workflow task that
// started before the cutoff. A context without a workflow says no.
func (m *sealed) beforeCutoff(ctx workflow.Context) (before bool) {
	defer func() {
		if recover() != nil {
			before = false
		}
	}()
	return workflow.Now(ctx).Before(m.cutoff)
}

// legacyCodec opens sealed payloads as Codec does and passes an unsealed
// one through while accept says so.
type legacyCodec struct {
	Codec
	accept func() bool
}

func (c *legacyCodec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[metaEncoder]) != Encoding && c.accept() {
			out[i] = p
			continue
		}
		d, err := c.Codec.Decode([]*commonpb.Payload{p})
		if err != nil {
			return nil, err
		}
		out[i] = d[0]
	}
	return out, nil
}

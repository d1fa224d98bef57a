package seal

import (
	"context"
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
type migrating struct {
	converter.DataConverter // strict
	keys                    *Keyring
	cutoff                  time.Time
}

var (
	_ converter.ContextAware                          = (*migrating)(nil)
	_ converter.DataConverterWithSerializationContext = (*migrating)(nil)
)

// WithWorkflowContext accepts unsealed payloads decoded while ctx's run
// replays what happened before the cutoff. The time is read when a payload
// is decoded, not when the converter is bound (an activity's result is
// decoded tasks after it was scheduled).
func (m *migrating) WithWorkflowContext(ctx workflow.Context) converter.DataConverter {
	return converter.NewCodecDataConverter(payloadConverters(), &legacyCodec{Codec: Codec{Keys: m.keys}, accept: func() bool {
		return m.beforeCutoff(ctx)
	}})
}

// WithContext accepts unsealed input for an activity scheduled before the cutoff.
func (m *migrating) WithContext(ctx context.Context) converter.DataConverter {
	if activity.IsActivity(ctx) && activity.GetInfo(ctx).ScheduledTime.Before(m.cutoff) {
		return converter.NewCodecDataConverter(payloadConverters(), &legacyCodec{Codec: Codec{Keys: m.keys}, accept: func() bool { return true }})
	}
	return m
}

// WithSerializationContext keeps the migration: sealing does not depend on it.
func (m *migrating) WithSerializationContext(converter.SerializationContext) converter.DataConverter {
	return m
}

// beforeCutoff says whether ctx's run is replaying a workflow task that
// started before the cutoff. A context without a workflow says no.
func (m *migrating) beforeCutoff(ctx workflow.Context) (before bool) {
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

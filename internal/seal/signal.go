package seal

import (
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/workflow"
)

// Signals checks a signal's payloads before the workflow sees them (the
// worker's workflow inbound interceptor): each must be sealed by Remedy's
// parts, or, on a person's channel (an approval decision), by the codec
// server for an authenticated person. A refused signal is not delivered.
type Signals struct {
	Keys *Keyring
	// UnsealedBefore is the migration's cutoff (migrate.go): an unsealed
	// signal is accepted only while the run replays a task that started before it.
	UnsealedBefore time.Time
}

// Check returns a RefusedError (counted) for a payload the signal must not carry.
func (s *Signals) Check(ctx workflow.Context, signal string, personal bool, payloads *commonpb.Payloads) error {
	for _, p := range payloads.GetPayloads() {
		if string(p.GetMetadata()[metaEncoder]) != Encoding && !s.UnsealedBefore.IsZero() && (&sealed{cutoff: s.UnsealedBefore}).beforeCutoff(ctx) {
			continue
		}
		_, origin, err := s.Keys.open(p)
		if err != nil {
			return err
		}
		if origin == OriginPerson && !personal {
			return refuse(RefusedPerson, fmt.Sprintf("a person's payload on signal %q: people send approval decisions only", signal))
		}
	}
	return nil
}

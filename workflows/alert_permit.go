package workflows

import (
	"crypto/rand"
	"encoding/hex"

	"go.temporal.io/sdk/workflow"
)

// permitNonceChange is the workflow.GetVersion change ID of permits bound
// to their request: the run sends the guard a nonce with its acquire and
// accepts only the permit that carries it back. A run recorded before it
// takes the first permit signal it receives.
const permitNonceChange = "alert-permit-nonce"

// newPermitNonce is the secret that binds this run's request to the
// guard's answer. It is recorded once (SideEffect) so replay keeps it.
func newPermitNonce(ctx workflow.Context) string {
	var nonce string
	_ = workflow.SideEffect(ctx, func(workflow.Context) any {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}).Get(&nonce)
	return nonce
}

// receivePermits keeps every permit signal the run receives; take picks
// the one that answers its request.
func (r *alertRun) receivePermits(ctx workflow.Context) {
	ch := workflow.GetSignalChannel(ctx, SignalPermit)
	for {
		var p Permit
		ch.Receive(ctx, &p)
		r.permits = append(r.permits, p)
	}
}

// take sets r.permit to the first permit that answers the run's request:
// with a nonce, only one that carries it (a permit signalled by anyone
// else, or replayed from another run or request, is dropped and logged);
// without one (runs recorded before permitNonceChange), the first received.
func (r *alertRun) take(ctx workflow.Context) bool {
	for len(r.permits) > 0 {
		p := r.permits[0]
		r.permits = r.permits[1:]
		if r.nonce != "" && p.RequestNonce != r.nonce {
			workflow.GetLogger(ctx).Warn("permit refused: not the guard's answer to this run's request", "granted", p.Granted)
			continue
		}
		r.permit = &p
		return true
	}
	return false
}

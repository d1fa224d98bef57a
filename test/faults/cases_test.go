package faults

import (
	"testing"
	"time"
)

// down is how long a killed process stays down, by what it is: long enough
// for what depends on it to fail and retry, and for the API server shorter
// than the operator's renew deadline (10s). It is the fault's length, an
// input: a case sleeps it only with the part down (or watches through it
// with stays), and asserts once the part is back.
var down = map[string]time.Duration{worker: 3 * time.Second, operator: 8 * time.Second, webhook: 3 * time.Second,
	temporal: 3 * time.Second, apiserver: 4 * time.Second}

func cases() []faultCase {
	var cs []faultCase
	for _, proc := range []string{worker, temporal, operator, apiserver} {
		cs = append(cs, faultCase{proc, pointApproval, func(t *testing.T, p *parts) string { return approvalWait(t, p, proc) }})
	}
	for _, proc := range []string{worker, temporal, apiserver} {
		cs = append(cs, faultCase{proc, pointInline, func(t *testing.T, p *parts) string { return inlineWrite(t, p, proc) }})
	}
	for _, proc := range []string{worker, temporal} {
		cs = append(cs, faultCase{proc, pointJob, func(t *testing.T, p *parts) string { return jobPastTTL(t, p, proc) }})
	}
	for _, proc := range []string{worker, operator, temporal, apiserver} {
		cs = append(cs, faultCase{proc, pointReload, func(t *testing.T, p *parts) string { return reloadDebounce(t, p, proc) }})
	}
	for _, proc := range []string{worker, operator, temporal, apiserver} {
		cs = append(cs, faultCase{proc, pointRR, func(t *testing.T, p *parts) string { return rrBetweenSteps(t, p, proc) }})
	}
	for _, proc := range []string{worker, temporal, apiserver} {
		cs = append(cs, faultCase{proc, pointSaga, func(t *testing.T, p *parts) string { return rrCompensating(t, p, proc) }})
	}
	for _, proc := range []string{webhook, worker, temporal} {
		cs = append(cs, faultCase{proc, pointDrift, func(t *testing.T, p *parts) string { return driftOpen(t, p, proc) }})
	}
	for _, proc := range []string{worker, temporal} {
		cs = append(cs, faultCase{proc, pointReceipt, func(t *testing.T, p *parts) string { return alertReceipt(t, p, proc) }})
		cs = append(cs, faultCase{proc, pointFlap, func(t *testing.T, p *parts) string { return alertFlap(t, p, proc) }})
	}
	for _, proc := range []string{worker, temporal, apiserver} {
		cs = append(cs, faultCase{proc, pointVerify, func(t *testing.T, p *parts) string { return alertVerify(t, p, proc) }})
	}
	return cs
}

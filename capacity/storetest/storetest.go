// Package storetest is the contract test suite every capacity.Store
// implementation runs. Time is under the suite's control: a store under test
// must take its time from the clock the suite passes to the factory.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
)

// Epoch is the instant every suite clock starts at: a Thursday, 12:00 UTC.
var Epoch = time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC)

// Factory returns a new, empty store whose time is clock.Now (a manual clock
// the suite moves; the store need not use its timers). Each call must return
// a store that shares no state with earlier ones (a fresh key prefix is
// enough for a shared backend).
type Factory func(t *testing.T, clock capacity.Clock) capacity.Store

// Run runs the contract suite against the stores newStore makes.
func Run(t *testing.T, newStore Factory) { RunCases(t, cases, newStore) }

// RunCases runs some of the contract's cases (such as ClassCases) against
// the stores newStore makes.
func RunCases(t *testing.T, cases []Case, newStore Factory) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := capacitytest.NewManualClock(Epoch)
			h := &harness{t: t, clock: clock, store: newStore(t, clock), ctx: context.Background()}
			tc.run(h)
		})
	}
}

// Case is one case of the contract.
type Case struct {
	name string
	run  func(h *harness)
}

// Name is the case's name: the subtest RunCases runs it as.
func (c Case) Name() string { return c.name }

// harness holds one case's store and clock, with small helpers.
type harness struct {
	t     *testing.T
	clock *capacitytest.ManualClock
	store capacity.Store
	ctx   context.Context
	n     int
}

var testScope = capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-a"}

// rpm returns limits with only requests/min set and margin 1, burst 5 s.
func rpm(n int64) capacity.Limits {
	return capacity.Limits{RequestsPerMinute: n, SafetyMargin: 1, Burst: 5 * time.Second}
}

// req returns a request for a new call on testScope costing c.
func (h *harness) req(l capacity.Limits, c capacity.Charges) capacity.Request {
	h.n++
	return capacity.Request{Scope: testScope, Limits: l, Call: "call-" + itoa(h.n), Attempt: 1, Charges: c}
}

func itoa(n int) string { return capacity.LeaseID("", n)[1:] }

func (h *harness) reserve(r capacity.Request) capacity.Reservation {
	h.t.Helper()
	res, err := h.store.Reserve(h.ctx, r)
	require.NoError(h.t, err)
	return res
}

func (h *harness) grant(r capacity.Request) capacity.Lease {
	h.t.Helper()
	res := h.reserve(r)
	require.Truef(h.t, res.Granted, "want grant, got denial %s on %s until %v", res.Reason, res.Binding, res.RetryAt)
	return res.Lease
}

func (h *harness) deny(r capacity.Request) capacity.Reservation {
	h.t.Helper()
	res := h.reserve(r)
	require.False(h.t, res.Granted, "want denial, got grant")
	return res
}

func (h *harness) snap(sc capacity.Scope) capacity.Snapshot {
	h.t.Helper()
	s, err := h.store.Snapshot(h.ctx, sc)
	require.NoError(h.t, err)
	return s
}

// level returns the scope's level in d.
func (h *harness) level(d capacity.Dimension) float64 {
	h.t.Helper()
	return h.snap(testScope).Level[d]
}

func one() capacity.Charges {
	var c capacity.Charges
	c[capacity.Requests] = 1
	c[capacity.RequestsPerDay] = 1
	c[capacity.InFlight] = 1
	return c
}

func tokens(in, out int64) capacity.Charges {
	c := one()
	c[capacity.InputTokens] = in
	c[capacity.OutputTokens] = out
	c[capacity.Tokens] = in + out
	c[capacity.TokensPerDay] = in + out
	return c
}

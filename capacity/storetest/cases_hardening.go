package storetest

import (
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// hardeningCases: no single answer or number can break a scope. Each is
// named after a failure seen in production-like runs.
var hardeningCases = []Case{
	{"HugeBlockIsBounded", func(h *harness) {
		// A 429 saying "retry after 100 years" blocks for MaxBlock at most,
		// and an operator can lift it.
		l := rpm(60)
		h.grant(h.req(l, one()))
		now := h.clock.Now()
		require.NoError(h.t, h.store.Block(h.ctx, testScope, capacity.Block{Reason: capacity.QuotaExhausted, Until: now.Add(100 * 365 * 24 * time.Hour)}))
		res := h.deny(h.req(l, one()))
		assert.Equal(h.t, capacity.DenyBlocked, res.Reason)
		assert.LessOrEqual(h.t, res.RetryAt.Sub(res.Now), capacity.MaxBlock)
		assert.Greater(h.t, res.RetryAt.Sub(res.Now), capacity.MaxBlock-time.Second)
		require.NoError(h.t, h.store.Unblock(h.ctx, testScope, false))
		h.grant(h.req(l, one()))

		// A half-open time of 100 years is held to MaxBlock too: the probe's
		// hold on the others ends within it.
		h.clock.Advance(time.Second)
		now = h.clock.Now()
		require.NoError(h.t, h.store.Block(h.ctx, testScope, capacity.Block{Reason: capacity.Overloaded, Until: now.Add(time.Second), HalfOpen: 100 * 365 * 24 * time.Hour}))
		h.clock.Advance(time.Second)
		probe := h.reserve(h.req(l, one()))
		require.True(h.t, probe.Granted && probe.Probe, "the probe")
		res = h.deny(h.req(l, one()))
		assert.Equal(h.t, capacity.DenyBlocked, res.Reason)
		assert.LessOrEqual(h.t, res.RetryAt.Sub(res.Now), capacity.MaxBlock)
	}},
	{"SettleTwiceChargesOnce", func(h *harness) {
		// A settle retried after its reply was lost applies once.
		l := capacity.Limits{TokensPerMinute: 6000, SafetyMargin: 1, Burst: 5 * time.Second} // 100/s, capacity 500
		le := h.grant(h.req(l, tokens(100, 0)))
		final := tokens(100, 200) // 200 more than reserved: debt
		require.NoError(h.t, h.store.Settle(h.ctx, le, final))
		after := h.level(capacity.Tokens)
		assert.InDelta(h.t, 200, after, 1e-6)
		require.NoError(h.t, h.store.Settle(h.ctx, le, final))
		assert.InDelta(h.t, after, h.level(capacity.Tokens), 1e-6, "the second settle charged nothing")
	}},
	{"ReleaseThenSettleChargesNothing", func(h *harness) {
		l := capacity.Limits{TokensPerMinute: 6000, SafetyMargin: 1, Burst: 5 * time.Second}
		le := h.grant(h.req(l, tokens(100, 0)))
		require.NoError(h.t, h.store.Release(h.ctx, le))
		assert.InDelta(h.t, 500, h.level(capacity.Tokens), 1e-6)
		require.NoError(h.t, h.store.Settle(h.ctx, le, tokens(100, 300)))
		assert.InDelta(h.t, 500, h.level(capacity.Tokens), 1e-6, "a released lease has nothing left to settle")
		require.NoError(h.t, h.store.Release(h.ctx, le))
		assert.InDelta(h.t, 500, h.level(capacity.Tokens), 1e-6)
	}},
	{"ExpiredLeaseSettledTwiceChargesDebtOnce", func(h *harness) {
		l := capacity.Limits{TokensPerMinute: 6000, SafetyMargin: 1, Burst: 5 * time.Second}
		r := h.req(l, tokens(100, 0))
		r.TTL = time.Second
		le := h.grant(r)
		h.clock.Advance(2 * time.Second) // expired; refilled to 500
		require.NoError(h.t, h.store.Settle(h.ctx, le, tokens(100, 100)))
		assert.InDelta(h.t, 400, h.level(capacity.Tokens), 1e-6, "the debt applies")
		require.NoError(h.t, h.store.Settle(h.ctx, le, tokens(100, 100)))
		assert.InDelta(h.t, 400, h.level(capacity.Tokens), 1e-6, "once")
	}},
	{"SupersededLeaseSettledLateChargesDebtOnce", func(h *harness) {
		// Attempt 2 of a call supersedes attempt 1, whose answer comes
		// later: its usage beyond its reservation still counts, once.
		l := capacity.Limits{TokensPerMinute: 6000, SafetyMargin: 1, Burst: 5 * time.Second} // 100/s, capacity 500
		r := h.req(l, tokens(100, 0))
		first := h.grant(r)
		r.Attempt = 2
		second := h.grant(r)
		assert.InDelta(h.t, 300, h.level(capacity.Tokens), 1e-6, "the first attempt's tokens stay spent")
		require.NoError(h.t, h.store.Settle(h.ctx, second, second.Charges))
		require.NoError(h.t, h.store.Settle(h.ctx, first, tokens(100, 100)))
		assert.InDelta(h.t, 200, h.level(capacity.Tokens), 1e-6, "the debt applies")
		require.NoError(h.t, h.store.Settle(h.ctx, first, tokens(100, 100)))
		assert.InDelta(h.t, 200, h.level(capacity.Tokens), 1e-6, "once")
	}},
	{"LapsedLeaseForgottenAfterItsMemory", func(h *harness) {
		// A settle later than LapsedLeaseMemory after its lease lapsed
		// applies nothing: its reservation stays spent.
		l := capacity.Limits{TokensPerMinute: 6000, SafetyMargin: 1, Burst: 5 * time.Second}
		r := h.req(l, tokens(100, 0))
		r.TTL = time.Second
		le := h.grant(r)
		h.clock.Advance(2 * time.Second)
		h.grant(h.req(l, one())) // the store sees the lease lapsed
		h.clock.Advance(tuning.LapsedLeaseMemory)
		require.NoError(h.t, h.store.Settle(h.ctx, le, tokens(100, 300)))
		assert.InDelta(h.t, 500, h.level(capacity.Tokens), 1e-6, "forgotten: no debt")
	}},
	{"UnknownLeaseSettlesNothing", func(h *harness) {
		l := capacity.Limits{TokensPerMinute: 6000, SafetyMargin: 1, Burst: 5 * time.Second}
		h.grant(h.req(l, one()))
		never := capacity.Lease{ID: capacity.LeaseID("never", 1), Call: "never", Attempt: 1, Scope: testScope, Charges: tokens(100, 0)}
		require.NoError(h.t, h.store.Settle(h.ctx, never, tokens(100, 300)))
		assert.InDelta(h.t, 500, h.level(capacity.Tokens), 1e-6, "a lease never granted charges nothing")
	}},
	{"AttemptGrantedAgainAfterLapseSettlesOnce", func(h *harness) {
		// The same attempt reserved again after its lease expired holds a
		// new lease of the same id: settled twice, it charges once.
		l := capacity.Limits{TokensPerMinute: 6000, SafetyMargin: 1, Burst: 5 * time.Second}
		r := h.req(l, tokens(100, 0))
		r.TTL = time.Second
		h.grant(r)
		h.clock.Advance(2 * time.Second) // lapsed; refilled to 500
		le := h.grant(r)
		assert.InDelta(h.t, 400, h.level(capacity.Tokens), 1e-6)
		require.NoError(h.t, h.store.Settle(h.ctx, le, tokens(100, 100)))
		assert.InDelta(h.t, 300, h.level(capacity.Tokens), 1e-6)
		require.NoError(h.t, h.store.Settle(h.ctx, le, tokens(100, 100)))
		assert.InDelta(h.t, 300, h.level(capacity.Tokens), 1e-6, "once")
	}},
	{"AbsurdUsageIsBounded", func(h *harness) {
		// A settle reporting 1e15 tokens is held to what one call can use:
		// the whole per-minute limit. The scope waits about a minute, not
		// forever, and never grants over its budget.
		l := capacity.Limits{TokensPerMinute: 6000, SafetyMargin: 1, Burst: 5 * time.Second}
		le := h.grant(h.req(l, tokens(100, 0)))
		require.NoError(h.t, h.store.Settle(h.ctx, le, tokens(100, 1e15)))
		res := h.deny(h.req(l, tokens(100, 0)))
		wait := res.RetryAt.Sub(res.Now)
		assert.Greater(h.t, wait, 30*time.Second)
		assert.LessOrEqual(h.t, wait, 2*time.Minute)
		h.clock.Set(res.RetryAt)
		h.grant(h.req(l, tokens(100, 0)))
		h.deny(h.req(l, tokens(500, 0)))
	}},
	{"NegativeUsageRefundsNoMoreThanReserved", func(h *harness) {
		l := capacity.Limits{TokensPerMinute: 6000, SafetyMargin: 1, Burst: 5 * time.Second}
		h.grant(h.req(l, tokens(200, 0)))
		le := h.grant(h.req(l, tokens(100, 0)))
		require.NoError(h.t, h.store.Settle(h.ctx, le, tokens(-1e15, 0)))
		assert.InDelta(h.t, 300, h.level(capacity.Tokens), 1e-6, "refunds the reservation, no more")
	}},
	{"TinyReportedLimitNeverRefusesACall", func(h *harness) {
		// One response reporting a limit of 10 tokens: the scope keeps a
		// tenth of its configured limit at least, a call that fits the
		// configured limit waits instead of failing, and the lowering is
		// forgotten when no report repeats it.
		l := capacity.Limits{TokensPerMinute: 6000, SafetyMargin: 1, Burst: 5 * time.Second} // 100/s, capacity 500
		h.grant(h.req(l, tokens(10, 0)))
		var o capacity.Observation
		o.Dims[capacity.Tokens] = capacity.DimensionObservation{HasLimit: true, Limit: 10}
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		b := h.snap(testScope).Budget[capacity.Tokens]
		assert.InDelta(h.t, 10, b.Rate, 1e-9, "lowered to a tenth of 6,000 a minute, not to 10")
		assert.InDelta(h.t, 50, b.Capacity, 1e-9)
		res, err := h.store.Reserve(h.ctx, h.req(l, tokens(400, 0)))
		require.NoError(h.t, err, "a call within the configured limit is never refused")
		if !res.Granted {
			h.clock.Set(res.RetryAt)
			h.grant(h.req(l, tokens(400, 0)))
		}
		h.clock.Advance(tuning.LoweredLimitMemory)
		assert.InDelta(h.t, 100, h.snap(testScope).Budget[capacity.Tokens].Rate, 1e-9, "forgotten")
	}},
	{"UnworkableLimitsRefused", func(h *harness) {
		for _, l := range []capacity.Limits{
			{TokensPerMinute: 6000, SafetyMargin: 1e-300},
			{TokensPerMinute: 6000, SafetyMargin: 0.001},
			{TokensPerMinute: 6000, Burst: time.Nanosecond},
		} {
			_, err := h.store.Reserve(h.ctx, h.req(l, tokens(1, 0)))
			assert.ErrorIs(h.t, err, capacity.ErrInvalidLimits, "%+v", l)
		}
	}},
}

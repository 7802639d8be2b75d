package storetest

import (
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

var leaseCases = []Case{
	{"ReserveIsIdempotent", func(h *harness) {
		l := rpm(60)
		r := h.req(l, one())
		a := h.grant(r)
		b := h.grant(r)
		assert.Equal(h.t, a.ID, b.ID)
		assert.Equal(h.t, "call-1#1", a.ID)
		assert.InDelta(h.t, 4, h.level(capacity.Requests), 1e-9, "charged once")
		assert.Len(h.t, h.snap(testScope).Leases, 1)
	}},
	{"RetrySupersedesPreviousAttempt", func(h *harness) {
		l := rpm(60)
		l.MaxInFlight = 1
		r := h.req(l, one())
		h.grant(r)
		r.Attempt = 2
		le := h.grant(r)
		assert.Equal(h.t, 2, le.Attempt)
		s := h.snap(testScope)
		assert.Len(h.t, s.Leases, 1, "the first attempt's slot is released")
		assert.InDelta(h.t, 3, s.Level[capacity.Requests], 1e-9, "its tokens stay spent")
		r.Attempt = 1
		_, err := h.store.Reserve(h.ctx, r)
		assert.ErrorIs(h.t, err, capacity.ErrStaleAttempt)
	}},
	{"SummaryIsTheSnapshotWithoutItsLists", func(h *harness) {
		// A Summarizer reads what Snapshot does but the lists: how many
		// leases and tickets, and whether one call holds a ticket.
		sum, ok := h.store.(capacity.Summarizer)
		if !ok {
			h.t.Skip("the store reads no summary")
		}
		l := capacity.Limits{RequestsPerMinute: 60, MaxInFlight: 5, SafetyMargin: 1, Burst: time.Second} // 1/s, capacity 1
		h.grant(h.req(l, one()))
		booked := h.req(l, one())
		booked.Book = true
		h.deny(booked)
		require.NoError(h.t, h.store.Block(h.ctx, testScope, capacity.Block{Reason: capacity.Cooldown, Until: h.clock.Now().Add(time.Minute)}))
		snap := h.snap(testScope)
		for _, tt := range []struct {
			call  string
			holds bool
		}{{booked.Call, true}, {"another", false}, {"", false}} {
			got, err := sum.Summary(h.ctx, testScope, tt.call)
			require.NoError(h.t, err)
			assert.Equal(h.t, tt.holds, got.HoldsTicket, "call %q", tt.call)
			assert.Equal(h.t, 1, got.InFlight)
			assert.Equal(h.t, 1, got.Booked)
			assert.Equal(h.t, snap.Summary(tt.call), got, "call %q", tt.call)
			assert.Empty(h.t, got.Leases)
			assert.Empty(h.t, got.Tickets)
		}
		other := testScope
		other.LimitGroup = "none-yet"
		got, err := sum.Summary(h.ctx, other, "")
		require.NoError(h.t, err)
		assert.Zero(h.t, got.InFlight+got.Booked, "a scope without state")
	}},
	{"InFlightCap", func(h *harness) {
		l := rpm(600)
		l.MaxInFlight = 2
		a := h.grant(h.req(l, one()))
		h.grant(h.req(l, one()))
		res := h.deny(h.req(l, one()))
		assert.Equal(h.t, capacity.InFlight, res.Binding)
		require.NoError(h.t, h.store.Settle(h.ctx, a, a.Charges))
		h.grant(h.req(l, one()))
	}},
	{"ExpiredLeaseFreesSlotKeepsTokens", func(h *harness) {
		l := capacity.Limits{RequestsPerMinute: 6, MaxInFlight: 1, SafetyMargin: 1, Burst: 10 * time.Second} // capacity 1, 0.1/s
		r := h.req(l, one())
		r.TTL = 10 * time.Second
		le := h.grant(r)
		h.clock.Advance(10 * time.Second)
		s := h.snap(testScope)
		assert.Empty(h.t, s.Leases)
		assert.InDelta(h.t, 1, s.Level[capacity.Requests], 1e-9, "refilled by rate, not refunded")
		assert.InDelta(h.t, 1, s.Level[capacity.InFlight], 1e-9)
		_, err := h.store.Renew(h.ctx, le, time.Minute)
		assert.ErrorIs(h.t, err, capacity.ErrLeaseNotFound)
		h.grant(h.req(l, one()))
	}},
	{"RenewExtends", func(h *harness) {
		l := rpm(60)
		r := h.req(l, one())
		r.TTL = 10 * time.Second
		le := h.grant(r)
		h.clock.Advance(8 * time.Second)
		le2, err := h.store.Renew(h.ctx, le, 10*time.Second)
		require.NoError(h.t, err)
		assert.True(h.t, le2.Expires.Equal(h.clock.Now().Add(10*time.Second)))
		h.clock.Advance(8 * time.Second)
		assert.Len(h.t, h.snap(testScope).Leases, 1)
		_, err = h.store.Renew(h.ctx, le, 0)
		assert.ErrorIs(h.t, err, capacity.ErrInvalidRequest)
	}},
	{"SettleRefundsAndChargesDebt", func(h *harness) {
		l := capacity.Limits{OutputTokensPerMinute: 6000, SafetyMargin: 1, Burst: 5 * time.Second} // 100/s, capacity 500
		le := h.grant(h.req(l, tokens(0, 400)))
		assert.InDelta(h.t, 100, h.level(capacity.OutputTokens), 1e-9)
		final := le.Charges
		final[capacity.OutputTokens] = 100
		require.NoError(h.t, h.store.Settle(h.ctx, le, final))
		assert.InDelta(h.t, 400, h.level(capacity.OutputTokens), 1e-9, "unused output refunded")
		assert.Empty(h.t, h.snap(testScope).Leases)

		le = h.grant(h.req(l, tokens(0, 400)))
		final[capacity.OutputTokens] = 900 // 500 over the reservation
		require.NoError(h.t, h.store.Settle(h.ctx, le, final))
		assert.InDelta(h.t, -500, h.level(capacity.OutputTokens), 1e-9, "overrun is debt")
		res := h.deny(h.req(l, tokens(0, 100)))
		assert.Equal(h.t, 6*time.Second, res.RetryAt.Sub(res.Now), "debt delays later grants")
	}},
	{"RefundNeverExceedsCapacity", func(h *harness) {
		l := capacity.Limits{OutputTokensPerMinute: 6000, SafetyMargin: 1, Burst: 5 * time.Second}
		le := h.grant(h.req(l, tokens(0, 400)))
		h.clock.Advance(time.Minute)
		require.NoError(h.t, h.store.Settle(h.ctx, le, tokens(0, 0)))
		assert.InDelta(h.t, 500, h.level(capacity.OutputTokens), 1e-9)
	}},
	{"SettleAfterExpiryAppliesOnlyDebt", func(h *harness) {
		l := capacity.Limits{OutputTokensPerMinute: 600, SafetyMargin: 1, Burst: 50 * time.Second} // 10/s, capacity 500
		r := h.req(l, tokens(0, 400))
		r.TTL = 5 * time.Second
		le := h.grant(r)
		h.clock.Advance(5 * time.Second) // expired; level 100 + 50
		require.NoError(h.t, h.store.Settle(h.ctx, le, tokens(0, 100)))
		assert.InDelta(h.t, 150, h.level(capacity.OutputTokens), 1e-9, "no refund for an expired lease")

		r = h.req(l, tokens(0, 100))
		r.TTL = time.Second
		le = h.grant(r) // 50
		h.clock.Advance(time.Second)
		require.NoError(h.t, h.store.Settle(h.ctx, le, tokens(0, 300)))
		assert.InDelta(h.t, 60-200, h.level(capacity.OutputTokens), 1e-9, "the debt of an expired lease still counts")
	}},
	{"ReleaseRefundsEverything", func(h *harness) {
		l := capacity.Limits{RequestsPerMinute: 60, TokensPerMinute: 6000, MaxInFlight: 1, SafetyMargin: 1, Burst: 5 * time.Second}
		le := h.grant(h.req(l, tokens(300, 100)))
		require.NoError(h.t, h.store.Release(h.ctx, le))
		s := h.snap(testScope)
		assert.InDelta(h.t, 5, s.Level[capacity.Requests], 1e-9)
		assert.InDelta(h.t, 500, s.Level[capacity.Tokens], 1e-9)
		assert.InDelta(h.t, 1, s.Level[capacity.InFlight], 1e-9)
		require.NoError(h.t, h.store.Release(h.ctx, le), "releasing twice is a no-op")
		assert.InDelta(h.t, 5, h.level(capacity.Requests), 1e-9)
	}},
}

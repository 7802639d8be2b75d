package storetest

import (
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

var ticketCases = []Case{
	{"TicketBooksFutureCapacity", func(h *harness) {
		l := rpm(60)
		for range 5 {
			h.grant(h.req(l, one()))
		}
		first := h.req(l, one())
		first.Book = true
		res := h.deny(first)
		assert.True(h.t, res.Booked)
		assert.Equal(h.t, time.Second, res.RetryAt.Sub(res.Now))

		second := h.req(l, one())
		second.Book = true
		res2 := h.deny(second)
		assert.Equal(h.t, 2*time.Second, res2.RetryAt.Sub(res2.Now), "queued behind the first ticket")

		h.clock.Advance(500 * time.Millisecond)
		early := h.deny(first)
		assert.Equal(h.t, capacity.DenyTicket, early.Reason)
		assert.True(h.t, early.RetryAt.Equal(res.RetryAt), "an early claim keeps its time")

		h.clock.Set(res.RetryAt)
		other := h.req(l, one())
		h.deny(other) // a newcomer cannot take the booked capacity
		le := h.grant(first)
		assert.Equal(h.t, first.Charges, le.Charges)
		h.clock.Set(res2.RetryAt)
		h.grant(second)
		assert.Empty(h.t, h.snap(testScope).Tickets)
	}},
	{"TicketReplayedWithoutTrafficIsGranted", func(h *harness) {
		l := capacity.Limits{RequestsPerMinute: 60, TokensPerMinute: 6000, OutputTokensPerMinute: 1200, SafetyMargin: 1, Burst: 5 * time.Second}
		for range 2 {
			h.grant(h.req(l, tokens(150, 50)))
		}
		r := h.req(l, tokens(300, 90))
		r.Book = true
		res := h.deny(r)
		require.True(h.t, res.Booked)
		h.clock.Set(res.RetryAt)
		h.grant(r)
	}},
	{"TicketClaimWaitsForSlot", func(h *harness) {
		l := rpm(60)
		l.MaxInFlight = 5
		var held []capacity.Lease
		for range 5 {
			held = append(held, h.grant(h.req(l, one())))
		}
		r := h.req(l, one())
		r.Book = true
		res := h.deny(r)
		require.True(h.t, res.Booked)
		h.clock.Set(res.RetryAt)
		res = h.deny(r)
		assert.Equal(h.t, capacity.InFlight, res.Binding)
		assert.True(h.t, res.Booked, "the ticket is kept while the slot is busy")
		require.NoError(h.t, h.store.Settle(h.ctx, held[0], held[0].Charges))
		h.grant(r)
	}},
	{"UnclaimedTicketLapses", func(h *harness) {
		l := rpm(60)
		for range 5 {
			h.grant(h.req(l, one()))
		}
		r := h.req(l, one())
		r.Book = true
		h.deny(r)
		require.Len(h.t, h.snap(testScope).Tickets, 1)
		h.clock.Advance(time.Hour)
		assert.Empty(h.t, h.snap(testScope).Tickets)
	}},
	{"ReleasedTicketRefunds", func(h *harness) {
		l := rpm(60)
		for range 5 {
			h.grant(h.req(l, one()))
		}
		r := h.req(l, one())
		r.Book = true
		h.deny(r)
		assert.InDelta(h.t, -1, h.level(capacity.Requests), 1e-9)
		require.NoError(h.t, h.store.Release(h.ctx, capacity.Lease{Scope: testScope, Call: r.Call}))
		assert.InDelta(h.t, 0, h.level(capacity.Requests), 1e-9)
		assert.Empty(h.t, h.snap(testScope).Tickets)
	}},
	{"DeadlineRefusedBeforeBooking", func(h *harness) {
		l := rpm(60)
		for range 5 {
			h.grant(h.req(l, one()))
		}
		r := h.req(l, one())
		r.Book = true
		r.Deadline = h.clock.Now().Add(500 * time.Millisecond)
		res := h.deny(r)
		assert.Equal(h.t, capacity.DenyDeadline, res.Reason)
		assert.False(h.t, res.Booked)
		assert.InDelta(h.t, 0, h.level(capacity.Requests), 1e-9, "a refused call costs nothing")
		r.Deadline = h.clock.Now().Add(time.Second)
		res = h.deny(r)
		assert.Equal(h.t, capacity.DenyCapacity, res.Reason, "fits exactly at the deadline")
		assert.True(h.t, res.Booked)
	}},
}

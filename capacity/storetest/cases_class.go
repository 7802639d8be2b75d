package storetest

import (
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tollgate-dev/tollgate/capacity"
)

// classLimits: 10 requests a second in a 10-request bucket, with floors.
func classLimits(standard, bulk float64) capacity.Limits {
	return capacity.Limits{RequestsPerMinute: 600, Burst: time.Second, SafetyMargin: 1, StandardFloor: standard, BulkFloor: bulk}
}

func (h *harness) classReq(l capacity.Limits, c capacity.Class) capacity.Request {
	r := h.req(l, one())
	r.Class = c
	return r
}

// ClassCases are the contract's class rules: floors and aging.
var ClassCases = []Case{
	{"BulkLeavesTheFloorToInteractive", func(h *harness) {
		l := classLimits(0, 0.3)
		for range 7 {
			h.grant(h.classReq(l, capacity.Bulk))
		}
		res := h.deny(h.classReq(l, capacity.Bulk))
		assert.Equal(h.t, capacity.Requests, res.Binding)
		assert.Equal(h.t, 100*time.Millisecond, res.RetryAt.Sub(res.Now), "until one request above the floor")
		for range 3 {
			h.grant(h.classReq(l, capacity.Interactive))
		}
		h.deny(h.classReq(l, capacity.Interactive))
	}},
	{"StandardSitsBetween", func(h *harness) {
		l := classLimits(0.2, 0.5)
		for range 5 {
			h.grant(h.classReq(l, capacity.Bulk))
		}
		h.deny(h.classReq(l, capacity.Bulk))
		for range 3 {
			h.grant(h.classReq(l, capacity.Standard))
		}
		h.deny(h.classReq(l, capacity.Standard))
		for range 2 {
			h.grant(h.classReq(l, capacity.Interactive))
		}
	}},
	{"WaitingBulkDoesNotBlockInteractive", func(h *harness) {
		l := classLimits(0, 0.5)
		for range 5 {
			h.grant(h.classReq(l, capacity.Bulk))
		}
		r := h.classReq(l, capacity.Bulk)
		r.Book = true
		res := h.deny(r)
		assert.True(h.t, res.Booked)
		h.grant(h.classReq(l, capacity.Interactive)) // the floor is there for it
		h.clock.Set(res.RetryAt)
		late := h.deny(r) // the interactive call took a request: bulk keeps out of the floor
		assert.Equal(h.t, capacity.DenyTicket, late.Reason)
		assert.Equal(h.t, 100*time.Millisecond, late.RetryAt.Sub(late.Now))
		h.clock.Set(late.RetryAt)
		h.grant(r)
	}},
	{"InteractiveOvertakesBookedBulk", func(h *harness) {
		l := classLimits(0, 0.3)
		for range 7 {
			h.grant(h.classReq(l, capacity.Bulk))
		}
		var queued []capacity.Request
		var first capacity.Reservation
		for i := range 10 {
			r := h.classReq(l, capacity.Bulk)
			r.Book = true
			res := h.deny(r)
			assert.True(h.t, res.Booked)
			if i == 0 {
				first = res
			}
			queued = append(queued, r)
		}
		// The bulk queue is a second long; interactive calls still go now,
		// on what bulk left above its floor and what it booked.
		for range 3 {
			h.grant(h.classReq(l, capacity.Interactive))
		}
		res := h.deny(h.classReq(l, capacity.Interactive))
		assert.Equal(h.t, 100*time.Millisecond, res.RetryAt.Sub(res.Now))
		// The first bulk ticket, whose capacity was borrowed, moves later.
		h.clock.Set(first.RetryAt)
		late := h.deny(queued[0])
		assert.Equal(h.t, capacity.DenyTicket, late.Reason)
		assert.True(h.t, late.RetryAt.After(first.RetryAt))
		h.clock.Set(late.RetryAt)
		h.grant(queued[0])
	}},
	{"AgingLiftsLongWaitingWork", func(h *harness) {
		l := classLimits(0, 0.5)
		l.AgingAfter = time.Minute
		for range 5 {
			h.grant(h.classReq(l, capacity.Bulk))
		}
		h.deny(h.classReq(l, capacity.Bulk))
		old := h.classReq(l, capacity.Bulk)
		old.Since = h.clock.Now().Add(-61 * time.Second)
		h.grant(old)
	}},
	{"FloorsHoldInFlightSlotsAndDailyBudgets", func(h *harness) {
		l := capacity.Limits{RequestsPerMinute: 6000, MaxInFlight: 4, RequestsPerDay: 10, SafetyMargin: 1, BulkFloor: 0.5}
		var held []capacity.Lease
		for range 2 {
			held = append(held, h.grant(h.classReq(l, capacity.Bulk)))
		}
		res := h.deny(h.classReq(l, capacity.Bulk))
		assert.Equal(h.t, capacity.InFlight, res.Binding)
		for range 2 {
			held = append(held, h.grant(h.classReq(l, capacity.Interactive)))
		}
		for _, le := range held {
			assert.NoError(h.t, h.store.Settle(h.ctx, le, le.Charges))
		}
		// 4 of 10 requests spent today; bulk may reach 5.
		h.grant(h.classReq(l, capacity.Bulk))
		res = h.deny(h.classReq(l, capacity.Bulk))
		assert.Equal(h.t, capacity.DenyDailyQuota, res.Reason)
		h.grant(h.classReq(l, capacity.Interactive))
	}},
	{"InvalidFloors", func(h *harness) {
		for _, l := range []capacity.Limits{
			{StandardFloor: -0.1}, {BulkFloor: 1}, {StandardFloor: 0.5, BulkFloor: 0.2}, {AgingAfter: -time.Second},
		} {
			_, err := h.store.Reserve(h.ctx, h.req(l, one()))
			assert.ErrorIs(h.t, err, capacity.ErrInvalidLimits)
		}
	}},
}

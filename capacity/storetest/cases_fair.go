package storetest

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// FairCases are the contract's fairness rules: weighted fair queuing by
// fairness key in charged tokens, key caps (Fairness.Share,
// Fairness.TokensPerDay) and class rules given with each request
// (Request.Rule).
var FairCases = concat(fairOrderCases, keyCapCases, flowCases, ruleCases, fairInputCases)

// keyed returns a request for a new call of fairness key key on testScope.
func (h *harness) keyed(l capacity.Limits, f capacity.Fairness, c capacity.Charges) capacity.Request {
	r := h.req(l, c)
	r.Fairness = f
	return r
}

// flow returns the scope's flow of (class, key), failing if there is none.
func (h *harness) flow(class capacity.Class, key string) capacity.Flow {
	h.t.Helper()
	for _, f := range h.snap(testScope).Flows {
		if f.Class == class && f.Key == key {
			return f
		}
	}
	h.t.Fatalf("no flow %s/%q", class, key)
	return capacity.Flow{}
}

// keyUsage returns the counters of key's caps (zero if it has none).
func (h *harness) keyUsage(key string) capacity.KeyUsage {
	h.t.Helper()
	for _, k := range h.snap(testScope).Keys {
		if k.Key == key {
			return k
		}
	}
	return capacity.KeyUsage{Key: key}
}

// ticket returns call's booked ticket, failing if there is none.
func (h *harness) ticket(call string) capacity.Ticket {
	h.t.Helper()
	for _, tk := range h.snap(testScope).Tickets {
		if tk.Call == call {
			return tk
		}
	}
	h.t.Fatalf("no ticket for %s", call)
	return capacity.Ticket{}
}

// fairOrderCases: while keys wait, tickets come due in the order of
// weighted fair queuing over the tokens they are charged.
var fairOrderCases = []Case{
	{"TwoKeysShareByWeight", func(h *harness) {
		s := newFairSim(h, fairLimits(),
			&simFlow{name: "a", fair: capacity.Fairness{Key: "a", Weight: 1}, sizes: longTail, depth: 4},
			&simFlow{name: "b", fair: capacity.Fairness{Key: "b", Weight: 3}, sizes: rotated(longTail, 5), depth: 4})
		s.drain()
		s.run(400)
		gap := s.serviceGap(0, 0, 1)
		h.t.Logf("service gap %.0f tokens per unit of weight; b/a %.3f", gap, s.tokens(1, 0)/s.tokens(0, 0))
		assert.LessOrEqual(h.t, gap, 2*s.largest(), "tokens per unit of weight drift apart by at most two calls")
		assert.InEpsilon(h.t, 3, s.tokens(1, 0)/s.tokens(0, 0), 0.1, "tokens granted follow the weights 1:3")
	}},
	{"ThreeKeysShareByWeight", func(h *harness) {
		s := newFairSim(h, fairLimits(),
			&simFlow{name: "a", fair: capacity.Fairness{Key: "a"}, sizes: longTail, depth: 3},
			&simFlow{name: "b", fair: capacity.Fairness{Key: "b", Weight: 1}, sizes: rotated(longTail, 4), depth: 3},
			&simFlow{name: "c", fair: capacity.Fairness{Key: "c", Weight: 3}, sizes: rotated(longTail, 8), depth: 3})
		s.drain()
		s.run(500)
		gap := s.serviceGap(0, 0, 1, 2)
		a, b, c := s.tokens(0, 0), s.tokens(1, 0), s.tokens(2, 0)
		h.t.Logf("service gap %.0f; b/a %.3f, c/a %.3f", gap, b/a, c/a)
		assert.LessOrEqual(h.t, gap, 2*s.largest())
		assert.InEpsilon(h.t, 1, b/a, 0.1, "weights 1 and 1 (zero weight is 1)")
		assert.InEpsilon(h.t, 3, c/a, 0.1, "weights 1 and 3")
	}},
	{"NewcomerIsDueWithinARefill", func(h *harness) {
		l := fairLimits()
		s := newFairSim(h, l,
			&simFlow{name: "a", fair: capacity.Fairness{Key: "a"}, sizes: []int64{1000}, depth: 12},
			&simFlow{name: "b", fair: capacity.Fairness{Key: "b"}, sizes: []int64{1000}, depth: 12},
			&simFlow{name: "c", fair: capacity.Fairness{Key: "c"}, sizes: []int64{1000}})
		s.drain()
		s.run(40) // a and b keep 12 s of calls booked ahead
		before := len(h.snap(testScope).Tickets)
		require.GreaterOrEqual(h.t, before, 20)
		res := s.open(2)
		require.True(h.t, res.Granted || res.Booked, "a newcomer books: %s", res.Reason)
		if res.Granted {
			return // due at once
		}
		h.t.Logf("newcomer due in %v", res.RetryAt.Sub(res.Now))
		assert.LessOrEqual(h.t, res.RetryAt.Sub(res.Now), l.Burst, "due within one refill period")
		mine := h.ticket("c-1")
		assert.True(h.t, mine.At.Equal(res.RetryAt), "RetryAt is the ticket's time after it took its place")
		later := 0
		for _, tk := range h.snap(testScope).Tickets {
			if tk.Call != mine.Call && tk.At.After(mine.At) {
				later++
			}
		}
		assert.GreaterOrEqual(h.t, later, before-2, "ahead of the tickets booked before it")
		// It is granted at its time, after at most one call of each other key.
		from := len(s.grants)
		for s.flows[2].open > 0 {
			s.step()
		}
		assert.LessOrEqual(h.t, len(s.grants)-from, 3)
		assert.False(h.t, s.grants[len(s.grants)-1].at.After(res.RetryAt))
	}},
	{"HeldCallStartsWhenItWasScheduled", func(h *harness) {
		// a's calls reach the store first and take the burst; b's were
		// scheduled at the same moment but held before the store (in
		// Temporal's queue). Placed at the virtual time of when they were
		// scheduled (Request.Since), b's calls go ahead of a's booked
		// ones until b has had as much: it is not charged for the hold.
		l := fairLimits() // 5,000 tokens at once, 1,000 a second
		t0 := h.clock.Now()
		h.clock.Advance(10 * time.Millisecond) // a's calls reach the store
		call := func(key string, i int, book bool) capacity.Request {
			r := h.keyed(l, capacity.Fairness{Key: key}, tokens(1000, 0))
			r.Call, r.Since, r.Book = fmt.Sprintf("%s-%d", key, i), t0, book
			return r
		}
		for i := range 5 {
			h.grant(call("a", i, false))
		}
		h.clock.Advance(300 * time.Millisecond)
		for i := 5; i < 10; i++ {
			require.True(h.t, h.deny(call("a", i, true)).Booked)
		}
		h.clock.Advance(200 * time.Millisecond)
		for i := range 3 {
			require.True(h.t, h.deny(call("b", i, true)).Booked)
		}
		assert.True(h.t, h.ticket("b-2").At.Before(h.ticket("a-5").At),
			"b's third call (due %v) goes before a's first booked one (due %v)", h.ticket("b-2").At, h.ticket("a-5").At)
		// A call scheduled now starts at the virtual time now.
		late := call("c", 0, true)
		late.Since = h.clock.Now()
		require.True(h.t, h.deny(late).Booked)
		assert.InDelta(h.t, 4000+1000, h.flow(capacity.Standard, "c").Finish, 1e-6, "started where a's last grant started")
	}},
	{"FairStartSharesTheFirstBurst", func(h *harness) {
		// On a scope at rest, a's calls arrive 100 ms before b's: with
		// FairStart they gather (b, a flow new to the gathering, keeps it
		// open 300 ms more), and the first burst (5,000 tokens and the
		// refill) is shared in fair order, not taken by a.
		l := fairLimits()
		t0 := h.clock.Now()
		call := func(key string, i int) capacity.Request {
			r := h.keyed(l, capacity.Fairness{Key: key}, tokens(1000, 0))
			r.Call, r.Book, r.FairStart = fmt.Sprintf("%s-%d", key, i), true, 300*time.Millisecond
			return r
		}
		for i := range 5 {
			require.True(h.t, h.deny(call("a", i)).Booked, "a gathers")
		}
		h.clock.Advance(100 * time.Millisecond)
		for i := range 5 {
			require.True(h.t, h.deny(call("b", i)).Booked, "b gathers")
		}
		// Released together, they are due in their fair order,
		// GatherSpacing apart: a, b, a, b, a.
		end := t0.Add(400 * time.Millisecond)
		first, order := map[string]int{}, make([]string, 5)
		for _, tk := range h.snap(testScope).Tickets {
			if k := tk.At.Sub(end) / tuning.GatherSpacing; k >= 0 && k < 5 && tk.At.Sub(end)%tuning.GatherSpacing == 0 {
				first[tk.Key]++
				order[k] = tk.Key
			}
		}
		assert.Equal(h.t, 5, first["a"]+first["b"], "the burst holds five calls: %v", first)
		assert.Equal(h.t, []string{"a", "b", "a", "b", "a"}, order)
		// Not before the gathering ends.
		assert.False(h.t, h.deny(call("a", 0)).Granted)
		h.clock.Set(t0.Add(300 * time.Millisecond))
		assert.False(h.t, h.deny(call("a", 0)).Granted, "b kept the gathering open")
		h.clock.Set(t0.Add(400 * time.Millisecond))
		h.grant(call("a", 0))
		// A scope at rest gathers again; without FairStart it does not.
		r := h.keyed(l, capacity.Fairness{Key: "c"}, tokens(10, 0))
		r.Scope.LimitGroup = "other"
		h.grant(r)
	}},
	{"IdleKeyKeepsNoCredit", func(h *harness) {
		s := newFairSim(h, fairLimits(),
			&simFlow{name: "a", fair: capacity.Fairness{Key: "a"}, sizes: longTail, depth: 4},
			&simFlow{name: "b", fair: capacity.Fairness{Key: "b"}, sizes: rotated(longTail, 3), depth: 4},
			&simFlow{name: "c", fair: capacity.Fairness{Key: "c"}, sizes: rotated(longTail, 6), depth: 4})
		s.drain()
		s.run(60)
		s.flows[2].depth = 0 // c goes idle; a and b take its share
		for s.flows[2].open > 0 {
			s.step()
		}
		idle := len(s.grants)
		s.runFor(time.Minute)
		back := len(s.grants)
		assert.Greater(h.t, s.tokens(0, idle)+s.tokens(1, idle), 0.9*60000, "a and b used c's share")
		s.flows[2].depth = 4
		s.run(240)
		gap := s.serviceGap(back, 0, 1, 2)
		h.t.Logf("service gap since c came back %.0f; c/a %.3f", gap, s.tokens(2, back)/s.tokens(0, back))
		assert.LessOrEqual(h.t, gap, 2*s.largest(),
			"after a minute idle, c gets its share, not a minute of catching up")
		assert.InEpsilon(h.t, 1, s.tokens(2, back)/s.tokens(0, back), 0.15)
	}},
}

// keyCapCases: a key's share of the scope and its tokens per day.
var keyCapCases = []Case{
	{"KeyShareWaitsWithoutBooking", func(h *harness) {
		l := fairLimits() // 5,000 tokens; a quarter is 1,250 refilling at 250/s
		capped := capacity.Fairness{Key: "x", Share: 0.25}
		for range 5 {
			h.grant(h.keyed(l, capped, tokens(250, 0)))
		}
		assert.InDelta(h.t, 0, h.keyUsage("x").ShareLevel[capacity.Tokens], 1e-6)
		r := h.keyed(l, capped, tokens(250, 0))
		r.Book = true
		res := h.deny(r)
		assert.Equal(h.t, capacity.DenyKeyCap, res.Reason)
		assert.Equal(h.t, capacity.Tokens, res.Binding)
		assert.Equal(h.t, time.Second, res.RetryAt.Sub(res.Now), "250 tokens at a quarter of the rate")
		assert.False(h.t, res.Booked)
		s := h.snap(testScope)
		assert.Empty(h.t, s.Tickets, "nothing booked")
		assert.InDelta(h.t, 3750, s.Level[capacity.Tokens], 1e-6, "the scope is left to the others")
		h.grant(h.keyed(l, capacity.Fairness{Key: "y"}, tokens(3000, 0)))
		h.clock.Set(res.RetryAt)
		assert.InDelta(h.t, 250, h.keyUsage("x").ShareLevel[capacity.Tokens], 1e-6, "refilled as of now")
		le := h.grant(r)
		assert.Equal(h.t, "x", le.Key)
		res = h.deny(h.keyed(l, capped, tokens(250, 0)))
		assert.Equal(h.t, capacity.DenyKeyCap, res.Reason, "the key's cap binds before the scope")
	}},
	{"KeyShareHoldsOverALongRun", func(h *harness) {
		s := newFairSim(h, fairLimits(),
			&simFlow{name: "x", fair: capacity.Fairness{Key: "x", Share: 0.25}, sizes: []int64{250, 100, 400}, depth: 4},
			&simFlow{name: "y", fair: capacity.Fairness{Key: "y"}, sizes: longTail, depth: 4})
		s.runFor(200 * time.Second)
		x, y := s.tokens(0, 0), s.tokens(1, 0)
		h.t.Logf("x has %.3f of %.0f tokens", x/(x+y), x+y)
		assert.InDelta(h.t, 0.25, x/(x+y), 0.03, "x is held to a quarter of what the scope granted")
		assert.Greater(h.t, x+y, 0.9*(5000+1000*200), "and the scope stayed busy")
		for _, tk := range h.snap(testScope).Tickets {
			if strings.HasPrefix(tk.Call, "x-") {
				assert.Equal(h.t, "x", tk.Key)
			}
		}
	}},
	{"KeyShareGivenLaterStartsClean", func(h *harness) {
		// What a key spent while it had no share never counts against a
		// share it is given later.
		l := capacity.Limits{TokensPerMinute: 600000, SafetyMargin: 1, Burst: 5 * time.Second} // 10,000/s
		k := capacity.Fairness{Key: "k", TokensPerDay: 1 << 30}
		for range 30 {
			le := h.grant(h.keyed(l, k, tokens(3000, 0)))
			require.NoError(h.t, h.store.Settle(h.ctx, le, le.Charges))
			h.clock.Advance(300 * time.Millisecond)
		}
		k.Share = 0.5
		res := h.reserve(h.keyed(l, k, tokens(3000, 0)))
		if !res.Granted {
			assert.Equal(h.t, capacity.DenyKeyCap, res.Reason)
			assert.LessOrEqual(h.t, res.RetryAt.Sub(res.Now), l.Burst, "within one refill of its share")
		}
	}},
	{"KeyTokensPerDay", func(h *harness) {
		l := capacity.Limits{TokensPerMinute: 600000, SafetyMargin: 1, Burst: 5 * time.Second} // never binds here
		k := capacity.Fairness{Key: "k", TokensPerDay: 10000}
		var leases []capacity.Lease
		for range 3 {
			leases = append(leases, h.grant(h.keyed(l, k, tokens(3000, 0))))
		}
		end := l.DayReset.Next(h.clock.Now())
		u := h.keyUsage("k")
		assert.InDelta(h.t, 9000, u.DayUsed, 1e-6)
		assert.True(h.t, u.DayEnd.Equal(end), "day ends %v, want %v", u.DayEnd, end)

		r := h.keyed(l, k, tokens(3000, 0))
		r.Book = true
		res := h.deny(r)
		assert.Equal(h.t, capacity.DenyKeyQuota, res.Reason)
		assert.True(h.t, res.RetryAt.Equal(end), "until the day window ends: %v", res.RetryAt)
		assert.False(h.t, res.Booked)
		assert.Empty(h.t, h.snap(testScope).Tickets)
		h.grant(h.keyed(l, capacity.Fairness{Key: "j", TokensPerDay: 10000}, tokens(5000, 0))) // another key is not held
		h.grant(h.keyed(l, k, tokens(1000, 0)))                                                // 10,000: exactly the cap
		assert.Equal(h.t, capacity.DenyKeyQuota, h.deny(h.keyed(l, k, tokens(1, 0))).Reason)

		// Settling with less usage gives tokens back; with more, charges.
		require.NoError(h.t, h.store.Settle(h.ctx, leases[0], tokens(1000, 0)))
		assert.InDelta(h.t, 8000, h.keyUsage("k").DayUsed, 1e-6)
		h.grant(h.keyed(l, k, tokens(2000, 0)))
		require.NoError(h.t, h.store.Settle(h.ctx, leases[1], tokens(4000, 0)))
		assert.InDelta(h.t, 11000, h.keyUsage("k").DayUsed, 1e-6)
		h.deny(h.keyed(l, k, tokens(1, 0)))
		require.NoError(h.t, h.store.Release(h.ctx, leases[2]))
		assert.InDelta(h.t, 8000, h.keyUsage("k").DayUsed, 1e-6, "a released call costs nothing")

		// A call larger than the cap is refused: no day admits it.
		big := h.keyed(l, k, tokens(10001, 0))
		_, err := h.store.Reserve(h.ctx, big)
		var tooLarge *capacity.DemandTooLargeError
		require.ErrorAs(h.t, err, &tooLarge)
		assert.True(h.t, tooLarge.Key, "the key's cap, not the scope's")
		assert.Equal(h.t, capacity.TokensPerDay, tooLarge.Dimension)
		assert.InDelta(h.t, 10000, tooLarge.Capacity, 1e-9)
		h.clock.Set(end)
		u = h.keyUsage("k")
		assert.InDelta(h.t, 0, u.DayUsed, 1e-6, "reset at the boundary")
		h.grant(h.keyed(l, k, tokens(10000, 0)))
		u = h.keyUsage("k")
		assert.InDelta(h.t, 10000, u.DayUsed, 1e-6)
		assert.True(h.t, u.DayEnd.Equal(l.DayReset.Next(end)))
	}},
	{"KeyDayCorrectionStaysInItsWindow", func(h *harness) {
		// The correction of a call charged before the day boundary belongs
		// to the old window: today's calls are charged at most
		// TokensPerDay.
		l := capacity.Limits{TokensPerMinute: 600000, SafetyMargin: 1, Burst: 5 * time.Second}
		k := capacity.Fairness{Key: "k", TokensPerDay: 10000}
		end := l.DayReset.Next(h.clock.Now())
		h.clock.Set(end.Add(-30 * time.Second))
		r := h.keyed(l, k, tokens(8000, 0))
		r.TTL = 10 * time.Minute
		yesterday := h.grant(r)
		h.clock.Set(end.Add(time.Second))
		h.grant(h.keyed(l, k, tokens(9000, 0)))
		require.NoError(h.t, h.store.Settle(h.ctx, yesterday, tokens(1000, 0)))
		assert.InDelta(h.t, 9000, h.keyUsage("k").DayUsed, 1e-6, "today's counter holds today's calls")
		assert.Equal(h.t, capacity.DenyKeyQuota, h.deny(h.keyed(l, k, tokens(8000, 0))).Reason)
	}},
	{"KeyTokensPerDayCountsBookedCalls", func(h *harness) {
		l := fairLimits()
		k := capacity.Fairness{Key: "k", TokensPerDay: 3000}
		h.grant(h.keyed(l, k, tokens(2000, 0)))
		h.grant(h.req(l, tokens(3000, 0))) // the bucket is empty
		r := h.keyed(l, k, tokens(1000, 0))
		r.Book = true
		res := h.deny(r)
		require.True(h.t, res.Booked)
		assert.InDelta(h.t, 3000, h.keyUsage("k").DayUsed, 1e-6, "a booking is charged")
		assert.Equal(h.t, capacity.DenyKeyQuota, h.deny(h.keyed(l, k, tokens(1, 0))).Reason)
		require.NoError(h.t, h.store.Release(h.ctx, capacity.Lease{Scope: testScope, Call: r.Call}))
		assert.InDelta(h.t, 2000, h.keyUsage("k").DayUsed, 1e-6, "a released ticket is given back")
	}},
	{"KeyTokensPerDayCountsWhatTheCallCosts", func(h *harness) {
		// A call costs the key its combined tokens where it has them
		// (OpenAI's TPM counts those, whatever input and output say), and a
		// correction moves that, not a difference of its parts.
		l := capacity.Limits{TokensPerMinute: 600000, SafetyMargin: 1, Burst: 5 * time.Second}
		k := capacity.Fairness{Key: "k", TokensPerDay: 100000}
		c := tokens(200, 1000) // input + output 1,200
		c[capacity.Tokens], c[capacity.TokensPerDay] = 1000, 1000
		le := h.grant(h.keyed(l, k, c))
		assert.InDelta(h.t, 1000, h.keyUsage("k").DayUsed, 1e-6)
		final := c
		final[capacity.Tokens], final[capacity.TokensPerDay] = 1100, 1100 // used 200 + 900
		require.NoError(h.t, h.store.Settle(h.ctx, le, final))
		assert.InDelta(h.t, 1100, h.keyUsage("k").DayUsed, 1e-6, "the call cost 1,100")

		h.grant(h.req(l, tokens(int64(h.level(capacity.Tokens)), 0))) // the bucket is empty
		r := h.keyed(l, k, c)
		r.Book = true
		require.True(h.t, h.deny(r).Booked)
		assert.InDelta(h.t, 2100, h.keyUsage("k").DayUsed, 1e-6)
		require.NoError(h.t, h.store.Release(h.ctx, capacity.Lease{Scope: testScope, Call: r.Call}))
		assert.InDelta(h.t, 1100, h.keyUsage("k").DayUsed, 1e-6, "a released ticket gives back what it cost")
	}},
}

// flowCases: a flow's virtual finish follows what its calls cost.
var flowCases = []Case{
	{"SettleMovesTheFlowFinish", func(h *harness) {
		l := fairLimits()
		a := capacity.Fairness{Key: "a", Weight: 2}
		b := capacity.Fairness{Key: "b"}
		la := h.grant(h.keyed(l, a, tokens(1000, 0)))
		assert.Equal(h.t, "a", la.Key)
		assert.InDelta(h.t, 2, la.Weight, 1e-9)
		lb := h.grant(h.keyed(l, b, tokens(1000, 0)))
		fa, fb := h.flow(capacity.Standard, "a"), h.flow(capacity.Standard, "b")
		assert.InDelta(h.t, 500, fa.Finish-fa.Virtual, 1e-6, "1,000 tokens at weight 2")
		assert.InDelta(h.t, 1000, fb.Finish-fb.Virtual, 1e-6)
		assert.InDelta(h.t, 1000, fa.Granted, 1e-6)

		require.NoError(h.t, h.store.Settle(h.ctx, la, tokens(1600, 0)))
		got := h.flow(capacity.Standard, "a")
		assert.InDelta(h.t, fa.Finish+300, got.Finish, 1e-6, "600 more tokens at weight 2")
		assert.InDelta(h.t, 1600, got.Granted, 1e-6)
		require.NoError(h.t, h.store.Settle(h.ctx, lb, tokens(100, 0)))
		got = h.flow(capacity.Standard, "b")
		assert.InDelta(h.t, fb.Finish-900, got.Finish, 1e-6)
		assert.InDelta(h.t, 100, got.Granted, 1e-6)

		// b's refund puts its next call ahead of a's, booked before it.
		h.grant(h.req(l, tokens(int64(h.level(capacity.Tokens)), 0)))
		ra := h.keyed(l, a, tokens(1000, 0))
		ra.Book = true
		resA := h.deny(ra)
		rb := h.keyed(l, b, tokens(1000, 0))
		rb.Book = true
		resB := h.deny(rb)
		require.True(h.t, resA.Booked && resB.Booked)
		assert.True(h.t, h.ticket(rb.Call).At.Before(h.ticket(ra.Call).At), "b's ticket is due first")
		assert.Less(h.t, h.ticket(rb.Call).Finish, h.ticket(ra.Call).Finish)
	}},
	{"ReleasedTicketGivesItsPlaceBack", func(h *harness) {
		l := fairLimits()
		h.grant(h.req(l, tokens(5000, 0))) // the bucket is empty
		book := func(key string) capacity.Request {
			r := h.keyed(l, capacity.Fairness{Key: key}, tokens(1000, 0))
			r.Book = true
			require.True(h.t, h.deny(r).Booked)
			return r
		}
		a1, a2, b1 := book("a"), book("a"), book("b")
		now := h.clock.Now()
		assert.Equal(h.t, 2*time.Second, h.ticket(b1.Call).At.Sub(now), "b's first call is due before a's second")
		assert.Equal(h.t, 3*time.Second, h.ticket(a2.Call).At.Sub(now))
		assert.InDelta(h.t, h.ticket(a2.Call).Finish, h.flow(capacity.Standard, "a").Finish, 1e-6)

		require.NoError(h.t, h.store.Release(h.ctx, capacity.Lease{Scope: testScope, Call: a2.Call}))
		assert.InDelta(h.t, h.ticket(a1.Call).Finish, h.flow(capacity.Standard, "a").Finish, 1e-6,
			"a finishes where its released last ticket started")
		start := h.ticket(a1.Call).Start
		require.NoError(h.t, h.store.Release(h.ctx, capacity.Lease{Scope: testScope, Call: a1.Call}))
		assert.InDelta(h.t, start, h.flow(capacity.Standard, "a").Finish, 1e-6)
		assert.Equal(h.t, time.Second, h.ticket(b1.Call).At.Sub(now), "b's ticket moves up")
		a3 := book("a")
		assert.InDelta(h.t, h.ticket(b1.Call).Finish, h.ticket(a3.Call).Finish, 1e-6, "a's place is where it was")
	}},
	{"IdleScopeStartsAfreshWhenItsLastTicketLapses", func(h *harness) {
		// The last ticket lapses at the very time of the snapshot: nothing
		// is booked or in flight any more, so the flows are forgotten. (The
		// Redis store compared times written with 14 digits, 100 µs apart,
		// until scripts 5.5, and counted such a ticket as booked.)
		h.clock.Advance(1234512 * time.Microsecond) // times whose last digits count
		l := fairLimits()                           // 1,000 tokens a second, 5,000 at once
		le := h.grant(h.keyed(l, capacity.Fairness{Key: "a"}, tokens(5000, 0)))
		require.NoError(h.t, h.store.Settle(h.ctx, le, le.Charges))
		b := h.keyed(l, capacity.Fairness{Key: "b"}, tokens(1000, 0))
		b.Book = true
		h.deny(b) // booked; its call never comes back
		h.clock.Set(h.ticket(b.Call).Expires)
		snap := h.snap(testScope)
		assert.Empty(h.t, snap.Tickets)
		assert.Empty(h.t, snap.Flows)
	}},
	{"IdleScopeStartsAfresh", func(h *harness) {
		// Nothing booked or in flight and every bucket full: no flow is
		// ahead of another any more, so the flows are forgotten.
		l := fairLimits()
		le := h.grant(h.keyed(l, capacity.Fairness{Key: "a"}, tokens(3000, 0)))
		require.NoError(h.t, h.store.Settle(h.ctx, le, le.Charges))
		assert.NotEmpty(h.t, h.snap(testScope).Flows, "the bucket is not full yet")
		h.clock.Advance(3 * time.Second) // 1,000 a second
		assert.Empty(h.t, h.snap(testScope).Flows)
		le = h.grant(h.keyed(l, capacity.Fairness{Key: "b"}, tokens(1000, 0)))
		f := h.flow(capacity.Standard, "b")
		assert.InDelta(h.t, 1000, f.Finish, 1e-6, "b starts at virtual time 0")
	}},
	{"ReleasedLeaseGivesItsTokensBack", func(h *harness) {
		l := fairLimits()
		h.grant(h.keyed(l, capacity.Fairness{Key: "b"}, tokens(1000, 0))) // in flight: the scope is not idle
		le := h.grant(h.keyed(l, capacity.Fairness{Key: "a"}, tokens(1000, 0)))
		f := h.flow(capacity.Standard, "a")
		require.NoError(h.t, h.store.Release(h.ctx, le))
		got := h.flow(capacity.Standard, "a")
		assert.InDelta(h.t, f.Finish-1000, got.Finish, 1e-6)
		assert.InDelta(h.t, 0, got.Granted, 1e-6)
	}},
}

// ruleCases: a class rule given with the request (Request.Rule) decides
// rank, floor and weight; Class only names the class.
var ruleCases = []Case{
	{"HigherRankGoesFirstWhateverItsFinish", func(h *harness) {
		l := fairLimits()
		low := &capacity.ClassRule{Rank: 1}
		high := &capacity.ClassRule{Rank: 4}
		call := func(rule *capacity.ClassRule, c capacity.Class, key string, n int64, book bool) capacity.Request {
			r := h.keyed(l, capacity.Fairness{Key: key}, tokens(n, 0))
			r.Rule, r.Class, r.Book = rule, c, book
			return r
		}
		h.grant(call(high, capacity.Standard, "h", 4000, false)) // h is far ahead in its rank
		h.grant(call(low, capacity.Bulk, "l", 1000, false))      // the bucket is empty
		l1, l2 := call(low, capacity.Bulk, "l", 500, true), call(low, capacity.Bulk, "l", 500, true)
		h.deny(l1)
		h.deny(l2)
		hr := call(high, capacity.Standard, "h", 500, true)
		res := h.deny(hr)
		require.True(h.t, res.Booked)
		now := h.clock.Now()
		th, t1 := h.ticket(hr.Call), h.ticket(l1.Call)
		assert.Equal(h.t, 4, th.Rank)
		assert.Equal(h.t, 1, t1.Rank)
		assert.Greater(h.t, th.Finish, t1.Finish)
		assert.Equal(h.t, 500*time.Millisecond, th.At.Sub(now), "on what the lower rank booked")
		assert.Equal(h.t, time.Second, t1.At.Sub(now), "the lower rank's tickets move back")
		assert.Equal(h.t, 1500*time.Millisecond, h.ticket(l2.Call).At.Sub(now))

		h.clock.Set(now.Add(500 * time.Millisecond))
		assert.Equal(h.t, capacity.DenyTicket, h.deny(l1).Reason)
		h.grant(hr)
		h.clock.Set(now.Add(time.Second))
		h.grant(l1)
		h.clock.Set(now.Add(1500 * time.Millisecond))
		h.grant(l2)
	}},
	{"RuleFloorLeavesBudgetToHigherRanks", func(h *harness) {
		l := classLimits(0, 0.5) // the rule, not BulkFloor, applies
		r := func(rule capacity.ClassRule) capacity.Request {
			q := h.classReq(l, capacity.Bulk)
			q.Rule = &rule
			return q
		}
		for range 7 {
			h.grant(r(capacity.ClassRule{Rank: 0, Floor: 0.3}))
		}
		res := h.deny(r(capacity.ClassRule{Rank: 0, Floor: 0.3}))
		assert.Equal(h.t, 100*time.Millisecond, res.RetryAt.Sub(res.Now), "until one request above the floor")
		for range 3 {
			h.grant(r(capacity.ClassRule{Rank: 5}))
		}
		h.deny(r(capacity.ClassRule{Rank: 5}))
	}},
	{"SameRankClassesShareByWeight", func(h *harness) {
		s := newFairSim(h, fairLimits(),
			&simFlow{name: "p", class: 3, rule: &capacity.ClassRule{Rank: 2, Weight: 1}, sizes: longTail, depth: 4},
			&simFlow{name: "q", class: 4, rule: &capacity.ClassRule{Rank: 2, Weight: 2}, sizes: rotated(longTail, 6), depth: 4})
		s.drain()
		s.run(300)
		gap := s.serviceGap(0, 0, 1)
		h.t.Logf("service gap %.0f; q/p %.3f", gap, s.tokens(1, 0)/s.tokens(0, 0))
		assert.LessOrEqual(h.t, gap, 2*s.largest())
		assert.InEpsilon(h.t, 2, s.tokens(1, 0)/s.tokens(0, 0), 0.1)
		f := h.flow(4, "")
		assert.Equal(h.t, 2, f.Rank)
	}},
	{"AgedClassTakesTheNextRanksRule", func(h *harness) {
		set, err := capacity.NewClassSet(
			capacity.ClassDef{Name: "batch", Rank: 0, Floor: 0.5, AgingAfter: time.Minute},
			capacity.ClassDef{Name: "normal", Rank: 1},
			capacity.ClassDef{Name: "urgent", Rank: 3})
		require.NoError(h.t, err)
		batch, _ := set.Lookup("batch")
		l := classLimits(0, 0)
		call := func(since time.Time) capacity.Request {
			r := h.classReq(l, batch)
			rule, lifted := set.Rule(batch, since, h.clock.Now())
			r.Rule, r.Class, r.Since = &rule, lifted, since
			return r
		}
		for range 5 {
			h.grant(call(time.Time{}))
		}
		h.deny(call(h.clock.Now().Add(-59 * time.Second)))
		old := call(h.clock.Now().Add(-61 * time.Second))
		assert.Equal(h.t, "normal", set.Name(old.Class))
		le := h.grant(old)
		assert.Equal(h.t, old.Class, le.Class)
	}},
}

// fairInputCases: fairness keys and policies a store must refuse.
var fairInputCases = []Case{
	{"InvalidFairnessRefused", func(h *harness) {
		l := fairLimits()
		secret := "sk-live-0123456789"
		for _, tc := range []struct {
			name string
			f    capacity.Fairness
			rule *capacity.ClassRule
			want error
		}{
			{"space", capacity.Fairness{Key: "tenant " + secret}, nil, capacity.ErrInvalidFairness},
			{"slash", capacity.Fairness{Key: "tenant/" + secret}, nil, capacity.ErrInvalidFairness},
			{"hash tag", capacity.Fairness{Key: "{" + secret + "}"}, nil, capacity.ErrInvalidFairness},
			{"utf-8", capacity.Fairness{Key: "ténant-" + secret}, nil, capacity.ErrInvalidFairness},
			{"nul", capacity.Fairness{Key: secret + "\x00"}, nil, capacity.ErrInvalidFairness},
			{"too long", capacity.Fairness{Key: secret + strings.Repeat("k", capacity.MaxFairnessKeyLength)}, nil, capacity.ErrInvalidFairness},
			{"negative weight", capacity.Fairness{Key: "a", Weight: -1}, nil, capacity.ErrInvalidFairness},
			{"weight over max", capacity.Fairness{Key: "a", Weight: capacity.MaxWeight * 2}, nil, capacity.ErrInvalidFairness},
			{"NaN weight", capacity.Fairness{Key: "a", Weight: math.NaN()}, nil, capacity.ErrInvalidFairness},
			{"infinite weight", capacity.Fairness{Key: "a", Weight: math.Inf(1)}, nil, capacity.ErrInvalidFairness},
			{"weight under min", capacity.Fairness{Key: "a", Weight: capacity.MinWeight / 2}, nil, capacity.ErrInvalidFairness},
			{"denormal weight", capacity.Fairness{Key: "a", Weight: math.SmallestNonzeroFloat64}, nil, capacity.ErrInvalidFairness},
			{"share over 1", capacity.Fairness{Key: "a", Share: 1.5}, nil, capacity.ErrInvalidFairness},
			{"negative share", capacity.Fairness{Key: "a", Share: -0.1}, nil, capacity.ErrInvalidFairness},
			{"NaN share", capacity.Fairness{Key: "a", Share: math.NaN()}, nil, capacity.ErrInvalidFairness},
			{"negative tokens per day", capacity.Fairness{Key: "a", TokensPerDay: -1}, nil, capacity.ErrInvalidFairness},
			{"negative rank", capacity.Fairness{}, &capacity.ClassRule{Rank: -1}, capacity.ErrInvalidRequest},
			{"rank over max", capacity.Fairness{}, &capacity.ClassRule{Rank: capacity.MaxRank + 1}, capacity.ErrInvalidRequest},
			{"floor 1", capacity.Fairness{}, &capacity.ClassRule{Floor: 1}, capacity.ErrInvalidRequest},
			{"NaN floor", capacity.Fairness{}, &capacity.ClassRule{Floor: math.NaN()}, capacity.ErrInvalidRequest},
			{"negative class weight", capacity.Fairness{}, &capacity.ClassRule{Weight: -2}, capacity.ErrInvalidRequest},
			{"denormal class weight", capacity.Fairness{}, &capacity.ClassRule{Weight: math.SmallestNonzeroFloat64}, capacity.ErrInvalidRequest},
		} {
			r := h.keyed(l, tc.f, tokens(100, 0))
			r.Rule, r.Book = tc.rule, true
			res, err := h.store.Reserve(h.ctx, r)
			require.ErrorIs(h.t, err, tc.want, tc.name)
			assert.False(h.t, res.Granted, tc.name)
			assert.NotContains(h.t, err.Error(), secret, "%s: the error never holds the key", tc.name)
		}
		s := h.snap(testScope)
		assert.Empty(h.t, s.Leases, "nothing granted")
		assert.Empty(h.t, s.Tickets, "nothing booked")
		assert.Empty(h.t, s.Flows)
		assert.Empty(h.t, s.Keys)

		// The bounds themselves are valid.
		for _, f := range []capacity.Fairness{
			{Key: strings.Repeat("k", capacity.MaxFairnessKeyLength)},
			{Key: "Team_a-1.eu:prod@x", Weight: capacity.MaxWeight, Share: 1, TokensPerDay: 1 << 40},
			{Key: "light", Weight: capacity.MinWeight},
		} {
			h.grant(h.keyed(l, f, tokens(100, 0)))
		}
		r := h.req(l, tokens(100, 0))
		r.Rule = &capacity.ClassRule{Rank: capacity.MaxRank, Floor: 0.5, Weight: capacity.MaxWeight}
		h.grant(r)
	}},
}

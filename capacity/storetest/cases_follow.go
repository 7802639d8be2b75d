package storetest

import (
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// followCases: the level follows what the provider reports, up and down,
// and booked tickets follow the level.
var followCases = []Case{
	{"ReportedRemainingRaisesLevelToTheLimit", func(h *harness) {
		// The provider's bucket holds a full minute; tollgate's holds 5 s.
		l := capacity.Limits{TokensPerMinute: 60000, SafetyMargin: 1, Burst: 5 * time.Second}
		le := h.grant(h.req(l, tokens(4000, 0)))
		require.NoError(h.t, h.store.Settle(h.ctx, le, le.Charges))
		o := reported(capacity.Tokens, 60000, 56000)
		o.Mark = le.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 56000, h.level(capacity.Tokens), 1e-9)
		h.grant(h.req(l, tokens(53000, 0))) // what the provider said it has
		// From there it refills up to its own capacity, no higher.
		h.clock.Advance(time.Minute)
		assert.InDelta(h.t, 5000, h.level(capacity.Tokens), 1e-9)

		// Never above the limit, whatever the provider says.
		o = reported(capacity.Tokens, 60000, 90000)
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 60000, h.level(capacity.Tokens), 1e-9)
	}},
	{"LargerPoolsRemainingNeverRaisesLevel", func(h *harness) {
		// A team configured with 60,000 of a key's 600,000 tokens a minute:
		// the key's remaining is not the team's.
		l := capacity.Limits{TokensPerMinute: 60000, SafetyMargin: 1, Burst: 5 * time.Second}
		le := h.grant(h.req(l, tokens(4000, 0)))
		o := reported(capacity.Tokens, 600000, 590000)
		o.Mark = le.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 1000, h.level(capacity.Tokens), 1e-9)
		o = reported(capacity.Tokens, 600000, 500)
		o.Mark = le.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 500, h.level(capacity.Tokens), 1e-9, "it lowers it")
	}},
	{"EmptyReportNeverRaisesLevel", func(h *harness) {
		// A 429 pauses the scope for 2 s: the provider's bucket is taken to
		// be 2 s of refill in debt. Providers report a bucket in debt as
		// remaining 0, so a 0 that arrives after the 429 (a call in flight
		// answered late) must not pay that debt off.
		l := capacity.Limits{TokensPerMinute: 60000, SafetyMargin: 1, Burst: 5 * time.Second} // 1000/s
		le := h.grant(h.req(l, tokens(5000, 0)))
		require.NoError(h.t, h.store.Block(h.ctx, testScope, capacity.Block{Reason: capacity.Cooldown, Until: h.clock.Now().Add(2 * time.Second)}))
		debt := h.level(capacity.Tokens)
		require.Less(h.t, debt, -1000.0, "the cooldown leaves the bucket in debt")
		o := reported(capacity.Tokens, 60000, 0)
		o.Mark = le.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, debt, h.level(capacity.Tokens), 1e-9, "remaining 0 only bounds the level from above")
		o = reported(capacity.Tokens, 60000, 800)
		o.Mark = le.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		// Up, less the cut's share (0.3) of ReorderWindow's refill, 75
		// (ReportAfterA429StopsShortOfTheToken).
		assert.InDelta(h.t, 800-0.3*1000*tuning.ReorderWindow.Seconds(), h.level(capacity.Tokens), 1e-9, "a remaining above zero is followed up")
	}},
	{"ReportFromBeforeALimitFellNeverLiftsIt", func(h *harness) {
		// The provider halves its limit between two answers, and the older
		// answer (the old limit, much remaining) is read after the newer
		// one: it tells of the provider before the fall, so the limit
		// stays lowered and the level is not raised. A report of a call
		// granted after the lowering one lifts it.
		l := capacity.Limits{TokensPerMinute: 60000, SafetyMargin: 1, Burst: 5 * time.Second} // 1000/s, capacity 5000
		older := h.grant(h.req(l, tokens(1000, 0)))
		newer := h.grant(h.req(l, tokens(1000, 0)))
		o := reported(capacity.Tokens, 30000, 0)
		o.Mark = newer.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		require.InDelta(h.t, 500, h.snap(testScope).Budget[capacity.Tokens].Rate, 1e-9, "lowered")
		level := h.level(capacity.Tokens)

		o = reported(capacity.Tokens, 60000, 4000)
		o.Mark = older.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 500, h.snap(testScope).Budget[capacity.Tokens].Rate, 1e-9, "still lowered")
		assert.InDelta(h.t, level, h.level(capacity.Tokens), 1e-9, "not raised")

		h.clock.Advance(time.Second) // the lowered rate refills 500
		later := h.grant(h.req(l, tokens(10, 0)))
		o = reported(capacity.Tokens, 60000, 4000)
		o.Mark = later.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 1000, h.snap(testScope).Budget[capacity.Tokens].Rate, 1e-9, "lifted by a later report")
	}},
	{"ReportMovesTheLevelOnlyAsFarAsItProves", func(h *harness) {
		// A provider that reports its bucket when it answers counts calls
		// sent after the observed one, one that reports it when it admits
		// the call does not: the bucket lies between the remaining less
		// what was granted since and the remaining.
		l := capacity.Limits{TokensPerMinute: 60000, SafetyMargin: 1, Burst: 5 * time.Second} // capacity 5000
		first := h.grant(h.req(l, tokens(1000, 0)))
		second := h.grant(h.req(l, tokens(1000, 0)))
		o := reported(capacity.Tokens, 60000, 2500) // second's answer: nothing granted since
		o.Mark = second.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 2500, h.level(capacity.Tokens), 1e-9, "lowered")
		o = reported(capacity.Tokens, 60000, 2500) // first's, answered later: between 1500 and 2500
		o.Mark = first.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 2500, h.level(capacity.Tokens), 1e-9, "second is not discounted twice")
		// Raised only once the calls granted before it are answered: sent
		// late, they may have reached the provider after it.
		o = reported(capacity.Tokens, 60000, 4000)
		o.Mark = second.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 3000, h.level(capacity.Tokens), 1e-9, "raised, first still in flight")
		// Answered since, first is in neither the live leases nor since: it
		// was in flight when second was granted (Mark.InFlight), and still
		// counts.
		require.NoError(h.t, h.store.Settle(h.ctx, first, first.Charges))
		require.NoError(h.t, h.store.Settle(h.ctx, second, second.Charges))
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 3000, h.level(capacity.Tokens), 1e-9, "first answered: no higher")
		o.Mark = first.Mark // nothing in flight at its grant, second since
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 3000, h.level(capacity.Tokens), 1e-9, "between 3000 and 4000: left")
		later := h.grant(h.req(l, tokens(0, 0))) // nothing in flight at its grant, nothing since
		require.NoError(h.t, h.store.Settle(h.ctx, later, later.Charges))
		o = reported(capacity.Tokens, 60000, 4000)
		o.Mark = later.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 4000, h.level(capacity.Tokens), 1e-9, "raised")
		third := h.grant(h.req(l, tokens(500, 0))) // 3500 left
		o = reported(capacity.Tokens, 60000, 3000) // first's mark: between 1500 and 3000
		o.Mark = first.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 3000, h.level(capacity.Tokens), 1e-9, "lowered to the most the report allows")
		o = reported(capacity.Tokens, 60000, 300) // another client spent it
		o.Mark = third.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 300, h.level(capacity.Tokens), 1e-9)
	}},
	{"RaiseDiscountsCallsInFlightAtItsGrant", func(h *harness) {
		// late was granted first and reached the provider after the observed
		// call (sent late, by another worker): a provider that reports at
		// admission has not counted it, though it was answered before the
		// report is read. The raise keeps what it held below the report.
		l := capacity.Limits{TokensPerMinute: 60000, SafetyMargin: 1, Burst: 5 * time.Second} // 1000/s, capacity 5000
		h.grant(h.req(l, tokens(500, 0)))                                                     // long in flight: it reached the provider first
		h.clock.Advance(tuning.ReorderWindow + time.Millisecond)                              // 4500 + 251
		late := h.grant(h.req(l, tokens(1000, 0)))
		observed := h.grant(h.req(l, tokens(2000, 0))) // 1751 left
		assert.InDelta(h.t, 1000, observed.Mark.InFlight[capacity.Tokens], 1e-9, "the mark holds what was granted just before it and in flight")
		require.NoError(h.t, h.store.Settle(h.ctx, late, late.Charges))
		require.NoError(h.t, h.store.Settle(h.ctx, observed, observed.Charges))
		o := reported(capacity.Tokens, 60000, 4500) // the provider had not counted late
		o.Mark = observed.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 3500, h.level(capacity.Tokens), 1e-9, "raised to the report less what was in flight at its grant")
	}},
	{"ReportKeepsTheSafetyMarginsHeadroom", func(h *harness) {
		// The default margin, 0.95: the bucket holds 4750 of the provider's
		// 5000, and a report of a full bucket leaves the margin's part of
		// the capacity (237.5) unspent, for estimates that err low.
		l := capacity.Limits{TokensPerMinute: 60000, Burst: 5 * time.Second}
		le := h.grant(h.req(l, tokens(1000, 0)))
		require.NoError(h.t, h.store.Settle(h.ctx, le, le.Charges))
		o := reported(capacity.Tokens, 60000, 5000)
		o.Mark = le.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 5000-0.05*4750, h.level(capacity.Tokens), 1e-9)
		// Just above the capacity, a raise stops at it.
		le = h.grant(h.req(l, tokens(4000, 0)))
		require.NoError(h.t, h.store.Settle(h.ctx, le, le.Charges))
		o = reported(capacity.Tokens, 60000, 4800)
		o.Mark = le.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 4750, h.level(capacity.Tokens), 1e-9)
		// Within the capacity, which the margin already keeps below the
		// provider's limit, a raise follows the report to the token.
		le = h.grant(h.req(l, tokens(4000, 0)))
		o = reported(capacity.Tokens, 60000, 1200)
		o.Mark = le.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 1200, h.level(capacity.Tokens), 1e-9)
	}},
	{"ReportAfterA429StopsShortOfTheToken", func(h *harness) {
		// A 429 cuts the rate by 0.3 (CooldownCut), which recovers 0.01 a
		// second: 2 s later a raise stops short of the report by the cut's
		// share of ReorderWindow's refill, 0.28 × 1000/s × 0.25 s = 70,
		// what an unseen client spending that share adds meanwhile.
		l := capacity.Limits{TokensPerMinute: 60000, SafetyMargin: 1, Burst: 5 * time.Second} // 1000/s
		le := h.grant(h.req(l, tokens(5000, 0)))
		require.NoError(h.t, h.store.Settle(h.ctx, le, le.Charges))
		require.NoError(h.t, h.store.Block(h.ctx, testScope, capacity.Block{Reason: capacity.Cooldown, Until: h.clock.Now().Add(time.Second)}))
		h.clock.Advance(2 * time.Second)
		require.Less(h.t, h.level(capacity.Tokens), 2000.0, "refilled at the cut rate from the pause's debt")
		o := reported(capacity.Tokens, 60000, 3000)
		o.Mark = le.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 3000-0.28*1000*tuning.ReorderWindow.Seconds(), h.level(capacity.Tokens), 1e-6)
	}},
	{"RemainingExcludingCallsInFlightDiscountsThem", func(h *harness) {
		l := capacity.Limits{OutputTokensPerMinute: 60000, SafetyMargin: 1, Burst: time.Minute}
		h.grant(h.req(l, output(2000))) // sent before le, still in flight: not counted by the provider yet
		le := h.grant(h.req(l, output(1000)))
		h.grant(h.req(l, output(3000))) // sent after le: counted since
		require.NoError(h.t, h.store.Settle(h.ctx, le, output(500)))
		o := reported(capacity.OutputTokens, 60000, 59500)
		o.Dims[capacity.OutputTokens].InFlightExcluded = true
		o.Mark = le.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 59500-2000-3000, h.level(capacity.OutputTokens), 1e-9)
	}},
	{"RefundBringsTicketsForward", func(h *harness) {
		l := capacity.Limits{TokensPerMinute: 6000, SafetyMargin: 1, Burst: 10 * time.Second} // 100/s, capacity 1000
		le := h.grant(h.req(l, tokens(1000, 0)))
		r := h.req(l, tokens(500, 0))
		r.Book = true
		res := h.deny(r)
		require.True(h.t, res.Booked)
		assert.Equal(h.t, 5*time.Second, res.RetryAt.Sub(res.Now))
		// The call used 600 of its 1000: 400 come back, and the ticket is
		// due 4 s earlier.
		require.NoError(h.t, h.store.Settle(h.ctx, le, tokens(600, 0)))
		early := h.deny(r)
		assert.Equal(h.t, capacity.DenyTicket, early.Reason)
		assert.Equal(h.t, time.Second, early.RetryAt.Sub(early.Now))
		h.clock.Advance(time.Second)
		h.grant(r)
	}},
	{"LowerReportPushesTicketsBack", func(h *harness) {
		l := capacity.Limits{TokensPerMinute: 6000, SafetyMargin: 1, Burst: 10 * time.Second}
		le := h.grant(h.req(l, tokens(1000, 0)))
		require.NoError(h.t, h.store.Settle(h.ctx, le, le.Charges))
		var due []time.Time
		var reqs []capacity.Request
		for range 3 {
			r := h.req(l, tokens(500, 0))
			r.Book = true
			res := h.deny(r)
			require.True(h.t, res.Booked)
			due, reqs = append(due, res.RetryAt), append(reqs, r)
		}
		// The provider halves the limit: the tickets booked at 100/s move
		// to 50/s at once, in their order.
		var o capacity.Observation
		o.Dims[capacity.Tokens] = capacity.DimensionObservation{HasLimit: true, Limit: 3000}
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		for i, r := range reqs {
			res := h.deny(r)
			require.Equal(h.t, capacity.DenyTicket, res.Reason)
			assert.Equal(h.t, time.Duration(i+1)*10*time.Second, res.RetryAt.Sub(res.Now), "ticket %d (booked for %v)", i, due[i].Sub(res.Now))
		}
	}},
	classWithoutFloors,
	{"EarlyCallerTakesAnOverdueTicketsPlace", func(h *harness) {
		l := capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1, Burst: time.Second} // 1/s, capacity 1
		h.grant(h.req(l, one()))
		away, here := h.req(l, one()), h.req(l, one())
		away.Book, here.Book = true, true
		h.deny(away) // due in 1 s; its call is away (parked in Temporal)
		res := h.deny(here)
		assert.Equal(h.t, 2*time.Second, res.RetryAt.Sub(res.Now))
		h.clock.Advance(time.Second + tuning.OverdueTicket)
		h.grant(here) // takes the overdue ticket's place
		late := h.deny(away)
		assert.Equal(h.t, capacity.DenyTicket, late.Reason)
		// It goes next, a second on: the bucket was full (and refilled
		// nothing) for the half second its ticket sat unclaimed.
		assert.Equal(h.t, time.Second, late.RetryAt.Sub(late.Now), "the call that was away goes next")
	}},
	{"EarlyCallerTakesNoPlaceBeyondTheFirst", func(h *harness) {
		// A debt pushes the first tuning.RetimeWindow tickets back a
		// minute; those further back keep their earlier times, which
		// pass. Their times are kept, not current: none of them is
		// overdue, so a call that comes early for the head ticket is told
		// its time. (Scripts 5.4 swapped it with one of them, back and
		// forth at each try, telling it half a minute later each time.)
		l := capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1, Burst: time.Second} // 1/s, capacity 1
		start := h.clock.Now()
		first := h.grant(h.req(l, one()))
		n := tuning.RetimeWindow + 8
		booked := make([]capacity.Request, n)
		for i := range booked {
			booked[i] = h.req(l, one())
			booked[i].Book = true
			h.deny(booked[i]) // due at i+1 s
		}
		used := first.Charges
		used[capacity.Requests] = 61 // a minute of debt (and the request itself)
		require.NoError(h.t, h.store.Settle(h.ctx, first, used))
		h.clock.Advance(50 * time.Second) // past every time further back (33–40 s), before the head's (61 s)
		res := h.deny(booked[0])
		require.Equal(h.t, capacity.DenyTicket, res.Reason)
		assert.Equal(h.t, 61*time.Second, res.RetryAt.Sub(start), "told its own time")
		h.clock.Advance(res.RetryAt.Sub(h.clock.Now()))
		h.grant(booked[0])
	}},
	{"LargerBudgetMovesTicketsBeyondTheFirstAsTheyNearTheHead", func(h *harness) {
		// A raised limit moves the first tuning.RetimeWindow tickets
		// forward at once; a ticket further back keeps its time until it
		// comes among them, then moves too (its call, which sleeps until
		// the time it was told, is told then: TicketDue). No move walks
		// every ticket.
		l := capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1, Burst: time.Second} // 1/s, capacity 1
		start := h.clock.Now()
		h.grant(h.req(l, one()))
		n := tuning.RetimeWindow + 8
		booked := make([]capacity.Request, n)
		for i := range booked {
			booked[i] = h.req(l, one())
			booked[i].Book = true
			h.deny(booked[i])                        // due at i+1 s
			booked[i].Limits.RequestsPerMinute = 120 // 2/s from now on
		}
		due := func(r capacity.Request) time.Duration {
			res := h.deny(r)
			require.Equal(h.t, capacity.DenyTicket, res.Reason)
			return res.RetryAt.Sub(start)
		}
		last, inside := booked[n-1], booked[tuning.RetimeWindow-1]
		assert.Equal(h.t, time.Duration(n)*time.Second, due(last), "a ticket further back keeps its time at first")
		assert.Equal(h.t, time.Duration(tuning.RetimeWindow)*time.Second/2, due(inside), "the last of the first, at the new rate")
		for i := 0; i+tuning.RetimeWindow < n; i++ {
			h.clock.Advance(start.Add(time.Duration(i+1) * time.Second / 2).Sub(h.clock.Now()))
			h.grant(booked[i])
		}
		assert.Equal(h.t, time.Duration(n)*time.Second/2, due(last), "the last ticket, at the new rate, as it neared the head")
	}},
	{"RefundKeepsAFlowsTicketsInOrder", func(h *harness) {
		// A refund moves its flow back in the fair order; the flow's next
		// booking still goes after the tickets it booked before, when they
		// are all its own.
		l := capacity.Limits{RequestsPerMinute: 60, TokensPerMinute: 6_000_000, SafetyMargin: 1, Burst: time.Second} // 1 request/s, capacity 1
		start := h.clock.Now()
		first := h.grant(h.req(l, tokens(5000, 0)))
		var booked []capacity.Request
		for i := range 3 {
			r := h.req(l, tokens(1000, 0))
			r.Book = true
			res := h.deny(r)
			require.Equal(h.t, time.Duration(i+1)*time.Second, res.RetryAt.Sub(start))
			booked = append(booked, r)
		}
		require.NoError(h.t, h.store.Settle(h.ctx, first, tokens(100, 0)))
		next := h.req(l, tokens(1000, 0))
		next.Book = true
		res := h.deny(next)
		assert.Equal(h.t, 4*time.Second, res.RetryAt.Sub(start), "after the flow's own tickets")
		for i, r := range booked {
			res := h.deny(r)
			assert.Equal(h.t, time.Duration(i+1)*time.Second, res.RetryAt.Sub(start), "ticket %d keeps its time", i)
		}
	}},
	{"DueTicketStaysOverdueThroughARetime", func(h *harness) {
		// A retime leaves a due ticket at the time it came due: one whose
		// call is away is still overdue after a refund moved the tickets.
		l := capacity.Limits{RequestsPerMinute: 60, TokensPerMinute: 6_000_000, SafetyMargin: 1, Burst: time.Second} // 1 request/s, capacity 1
		first := h.grant(h.req(l, tokens(1000, 0)))
		away, here := h.req(l, tokens(1000, 0)), h.req(l, tokens(1000, 0))
		away.Book, here.Book = true, true
		h.deny(away) // due in 1 s; its call is away
		res := h.deny(here)
		assert.Equal(h.t, 2*time.Second, res.RetryAt.Sub(res.Now))
		h.clock.Advance(time.Second + tuning.OverdueTicket)
		// Tokens come back, and the tickets are retimed; here then takes
		// the place of the ticket still overdue.
		require.NoError(h.t, h.store.Settle(h.ctx, first, tokens(100, 0)))
		h.grant(here)
	}},
	{"ReleasedTicketMovesTheOthersForward", func(h *harness) {
		l := capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1, Burst: time.Second} // 1/s, capacity 1
		h.grant(h.req(l, one()))
		a, b := h.req(l, one()), h.req(l, one())
		a.Book, b.Book = true, true
		h.deny(a)
		res := h.deny(b)
		assert.Equal(h.t, 2*time.Second, res.RetryAt.Sub(res.Now))
		require.NoError(h.t, h.store.Release(h.ctx, capacity.Lease{Scope: testScope, Call: a.Call}))
		res = h.deny(b)
		assert.Equal(h.t, time.Second, res.RetryAt.Sub(res.Now), "b takes a's place")
	}},
	ticketsNearingTheHead("Release", func(h *harness, _ capacity.Lease, booked []capacity.Request) int {
		require.NoError(h.t, h.store.Release(h.ctx, capacity.Lease{Scope: testScope, Call: booked[0].Call}))
		return 1
	}),
	{"TicketLapsesAfterTheTimeItsCallWasTold", func(h *harness) {
		// A ticket pushed back and brought forward again, its call told
		// neither move, lapses as it would have had it never moved: the
		// grace counts from the later of its time and the time told.
		l := capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1, Burst: time.Second} // 1/s, capacity 1
		h.grant(h.keyed(l, capacity.Fairness{Key: "a"}, one()))
		x := h.keyed(l, capacity.Fairness{Key: "a"}, one())
		x.Book = true
		h.deny(x)
		booked := h.ticket(x.Call)
		grace := booked.Expires.Sub(booked.At)
		y := h.keyed(l, capacity.Fairness{Key: "b"}, one())
		y.Book = true
		h.deny(y) // placed ahead of x, which it pushes back a second
		require.Equal(h.t, booked.At.Add(time.Second), h.ticket(x.Call).At)
		require.NoError(h.t, h.store.Release(h.ctx, capacity.Lease{Scope: testScope, Call: y.Call}))
		tk := h.ticket(x.Call)
		require.Equal(h.t, booked.At, tk.At)
		assert.Equal(h.t, grace, tk.Expires.Sub(tk.At), "as booked")
	}},
	{"BookingAheadMovesTicketsBeyondTheFirstAsTheyNearTheHead", func(h *harness) {
		// A booking placed ahead in the fair order pushes the tickets
		// behind it back: the first tuning.RetimeWindow at once, each
		// other one as it comes within that many of the head.
		l := capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1, Burst: time.Second} // 1/s, capacity 1
		start := h.clock.Now()
		h.grant(h.keyed(l, capacity.Fairness{Key: "a"}, one()))
		n := tuning.RetimeWindow + 8
		booked := make([]capacity.Request, n)
		for i := range booked {
			booked[i] = h.keyed(l, capacity.Fairness{Key: "a"}, one())
			booked[i].Book = true
			res := h.deny(booked[i])
			require.Equal(h.t, time.Duration(i+1)*time.Second, res.RetryAt.Sub(start))
		}
		b := h.keyed(l, capacity.Fairness{Key: "b"}, one())
		b.Book = true
		res := h.deny(b)
		assert.Equal(h.t, time.Second, res.RetryAt.Sub(start), "b's first call goes ahead of a's backlog")
		due := func(r capacity.Request) time.Duration {
			res := h.deny(r)
			require.Equal(h.t, capacity.DenyTicket, res.Reason)
			return res.RetryAt.Sub(start)
		}
		inside, last := booked[tuning.RetimeWindow-2], booked[n-1]
		assert.Equal(h.t, time.Duration(tuning.RetimeWindow)*time.Second, due(inside), "the last of the first tickets moved back")
		assert.Equal(h.t, time.Duration(n)*time.Second, due(last), "a ticket further back keeps its time")
		// The tickets are claimed at their times until the last one is
		// among the first: then it too is due a second later.
		h.clock.Advance(start.Add(time.Second).Sub(h.clock.Now()))
		h.grant(b)
		for i := 0; i+tuning.RetimeWindow < n; i++ {
			h.clock.Advance(start.Add(time.Duration(i+2) * time.Second).Sub(h.clock.Now()))
			h.grant(booked[i])
		}
		assert.Equal(h.t, time.Duration(n+1)*time.Second, due(last), "the last ticket moved back as it neared the head")
	}},
	ticketsPushedBack("Debt", capacity.Standard, func(h *harness, first capacity.Lease) {
		used := first.Charges
		used[capacity.Requests] = 2 // the provider counted a retry: a request of debt
		require.NoError(h.t, h.store.Settle(h.ctx, first, used))
	}),
	ticketsPushedBack("Borrow", capacity.Bulk, func(h *harness, _ capacity.Lease) {
		r := h.req(capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1, Burst: time.Second}, one())
		r.Class = capacity.Interactive
		h.clock.Advance(time.Second)
		h.grant(r) // takes the request the first bulk ticket booked
	}),
	ticketsNearingTheHead("Refund", func(h *harness, first capacity.Lease, _ []capacity.Request) int {
		used := first.Charges
		used[capacity.Requests] = 0 // the provider did not count the call: its request comes back
		require.NoError(h.t, h.store.Settle(h.ctx, first, used))
		return 0
	}),
}

// ticketsNearingTheHead is the case of a move that can only bring booked
// tickets forward (a release, a refund): the first tuning.RetimeWindow
// tickets move at once, and each other one, here by a second, as it comes
// within that many of the head. Until then it keeps its later time, which
// Reserve and Snapshot both report. move gives a second of the bucket back
// and returns the index of the first ticket still booked: first is the
// lease granted before the tickets were booked, booked the tickets' calls,
// each booked a second after the one before it.
func ticketsNearingTheHead(name string, move func(h *harness, first capacity.Lease, booked []capacity.Request) int) Case {
	return Case{name + "MovesTicketsBeyondTheFirstAsTheyNearTheHead", func(h *harness) {
		l := capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1, Burst: time.Second} // 1/s, capacity 1
		start := h.clock.Now()
		first := h.grant(h.req(l, one()))
		n := tuning.RetimeWindow + 8
		booked := make([]capacity.Request, n)
		for i := range booked {
			booked[i] = h.req(l, one())
			booked[i].Book = true
			res := h.deny(booked[i])
			require.Equal(h.t, time.Duration(i+1)*time.Second, res.RetryAt.Sub(start))
		}
		head := move(h, first, booked)
		due := func(r capacity.Request) time.Duration {
			res := h.deny(r)
			require.Equal(h.t, capacity.DenyTicket, res.Reason)
			return res.RetryAt.Sub(start)
		}
		inside, last := booked[head+tuning.RetimeWindow-1], booked[n-1]
		assert.Equal(h.t, time.Duration(head+tuning.RetimeWindow-1)*time.Second, due(inside), "the last of the first tickets moved forward")
		assert.Equal(h.t, time.Duration(n)*time.Second, due(last), "a ticket further back keeps its later time")
		snap := h.snap(testScope)
		tail := snap.Tickets[len(snap.Tickets)-1]
		assert.Equal(h.t, last.Call, tail.Call)
		assert.Equal(h.t, time.Duration(n)*time.Second, tail.At.Sub(start), "the snapshot reports what Reserve does")
		// The tickets are claimed at their times until the last one is
		// among the first: then it too is due a second earlier.
		for i := head; i+tuning.RetimeWindow < n; i++ {
			h.clock.Advance(start.Add(time.Duration(i) * time.Second).Sub(h.clock.Now()))
			h.grant(booked[i])
		}
		assert.Equal(h.t, time.Duration(n-1)*time.Second, due(last), "the last ticket moved forward as it neared the head")
	}}
}

// ticketsPushedBack is the case of a move that pushes booked tickets back
// (debt, a borrow; a lower report or limit and a 429's pause retime the
// same way): the first tuning.RetimeWindow tickets move back at once, here
// by a second, and each other one as it comes within that many of the
// head. Until then it keeps its earlier time and is not claimed: it is due
// no earlier than the last of the first. The tickets are booked in class
// cls, each a second after the one before it, behind first, the lease
// granted before them; move takes a second of the bucket, within the first
// second.
func ticketsPushedBack(name string, cls capacity.Class, move func(h *harness, first capacity.Lease)) Case {
	return Case{name + "MovesTicketsBeyondTheFirstAsTheyNearTheHead", func(h *harness) {
		l := capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1, Burst: time.Second} // 1/s, capacity 1
		start := h.clock.Now()
		first := h.grant(h.req(l, one()))
		n := tuning.RetimeWindow + 8
		booked := make([]capacity.Request, n)
		for i := range booked {
			booked[i] = h.req(l, one())
			booked[i].Class, booked[i].Book = cls, true
			res := h.deny(booked[i])
			require.Equal(h.t, time.Duration(i+1)*time.Second, res.RetryAt.Sub(start))
		}
		move(h, first)
		due := func(r capacity.Request) time.Duration {
			res := h.deny(r)
			require.Equal(h.t, capacity.DenyTicket, res.Reason)
			return res.RetryAt.Sub(start)
		}
		inside, beyond, last := booked[tuning.RetimeWindow-1], booked[tuning.RetimeWindow], booked[n-1]
		assert.Equal(h.t, time.Duration(tuning.RetimeWindow+1)*time.Second, due(inside), "the last of the first tickets moved back")
		assert.Equal(h.t, time.Duration(tuning.RetimeWindow+1)*time.Second, due(beyond), "a ticket further back waits for the first")
		assert.Equal(h.t, time.Duration(n)*time.Second, due(last), "a ticket further back keeps its time")
		// The tickets are claimed at their times until the last one is
		// among the first: then it too is due a second later.
		for i := 0; i+tuning.RetimeWindow < n; i++ {
			h.clock.Advance(start.Add(time.Duration(i+2) * time.Second).Sub(h.clock.Now()))
			h.grant(booked[i])
		}
		assert.Equal(h.t, time.Duration(n+1)*time.Second, due(last), "the last ticket moved back as it neared the head")
	}}
}

// reported is an observation of d's limit and remaining.
func reported(d capacity.Dimension, limit, left int64) capacity.Observation {
	o := remaining(d, left)
	o.Dims[d].HasLimit, o.Dims[d].Limit = true, limit
	return o
}

// classWithoutFloors: a higher class goes before what lower classes booked
// even with no floor set.
var classWithoutFloors = Case{"HigherClassOvertakesBookingsWithoutFloors", func(h *harness) {
	l := rpm(60) // 1/s, capacity 5, no floors
	for range 5 {
		h.grant(h.req(l, one()))
	}
	bulk := h.req(l, one())
	bulk.Class, bulk.Book = capacity.Bulk, true
	res := h.deny(bulk)
	require.True(h.t, res.Booked)
	assert.Equal(h.t, time.Second, res.RetryAt.Sub(res.Now))
	h.clock.Advance(time.Second)
	inter := h.req(l, one())
	inter.Class = capacity.Interactive
	h.grant(inter) // takes the capacity bulk booked
	late := h.deny(bulk)
	assert.Equal(h.t, capacity.DenyTicket, late.Reason)
	assert.Equal(h.t, time.Second, late.RetryAt.Sub(late.Now), "the bulk ticket moved a second later")
	h.clock.Advance(time.Second)
	h.grant(bulk)
}}

// output returns charges of one request with out output tokens.
func output(out int64) capacity.Charges {
	c := one()
	c[capacity.OutputTokens] = out
	return c
}

package redisstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// TestMatchesMemoryStore drives the Redis store and the memory store (the
// reference semantics) through the same random operations on the same manual
// clock and requires the same answers and the same snapshots after every step.
func TestMatchesMemoryStore(t *testing.T) { matchesMemoryStore(t, 6, EngineScripts) }

// TestRecordsMatchMemoryStore is TestMatchesMemoryStore on two workers of
// the records engine taking turns (but the batches of the scripts): what it
// checks is that their copies, kept through Redis, keep one scope.
func TestRecordsMatchMemoryStore(t *testing.T) { matchesMemoryStore(t, 6, EngineRecords) }

// TestMatchesMemoryStoreBeyondTheFirstTickets is TestMatchesMemoryStore
// with enough calls, and a step that books many at once (crowd), for more
// tickets than the first tuning.RetimeWindow: what happens to tickets
// further back (windowed retimes, claims beyond the first) is compared
// too.
func TestMatchesMemoryStoreBeyondTheFirstTickets(t *testing.T) {
	matchesMemoryStore(t, tuning.RetimeWindow+16, EngineScripts)
}

// matchesMemoryStore runs the differential test over calls distinct calls,
// on engine.
func matchesMemoryStore(t *testing.T, calls int, engine Engine) {
	t.Parallel()
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		clock := capacitytest.NewManualClock(storetest.Epoch)
		// prefix:run, so that deleteKeys(prefix) finds every run's keys.
		opts := Options{Prefix: fmt.Sprintf("%s:%d", prefix, run), Clock: clock, Engine: engine}
		rs, err := New(rdb, opts)
		require.NoError(rt, err)
		defer rs.Close()
		var store capacity.Store = rs
		if engine == EngineRecords {
			other, err := New(rdb, opts)
			require.NoError(rt, err)
			defer other.Close()
			store, rs = &recPair{a: rs, b: other}, nil // no batches of the scripts
		}
		m := &diffModel{
			calls: calls,
			clock: clock,
			mem:   capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock}),
			rs:    store,
			lua:   rs,
			memL:  map[string]capacity.Lease{},
			rsL:   map[string]capacity.Lease{},

			booked:   map[string]capacity.Request{},
			bookedAt: map[string]time.Time{},
		}
		for d := range m.on {
			m.on[d] = rapid.Bool().Draw(rt, "on-"+capacity.Dimension(d).String())
		}
		m.limits = m.drawLimits(rt)
		actions := map[string]func(*rapid.T){
			"reserve": m.reserve,
			"claim":   m.claim,
			"advance": func(t *rapid.T) {
				clock.Advance(time.Duration(rapid.Int64Range(0, 4000).Draw(t, "ms")) * time.Millisecond)
			},
			"nextDay": func(t *rapid.T) {
				clock.Advance(time.Duration(rapid.IntRange(1, 30).Draw(t, "hours")) * time.Hour)
			},
			"toRetryAt": func(t *rapid.T) {
				if m.retryAt.IsZero() {
					t.Skip()
				}
				clock.Set(m.retryAt)
			},
			"settle":        m.settle,
			"batch":         m.batch,
			"release":       m.release,
			"releaseTicket": m.releaseTicket,
			"renew":         m.renew,
			"observe":       m.observe,
			"block":         m.block,
			"unblock":       m.unblock,
			"limits": func(t *rapid.T) {
				m.limits = m.drawLimits(t)
			},
			"": m.compare,
		}
		if calls > tuning.RetimeWindow {
			actions["crowd"] = m.crowd // not in the saved failures of fewer calls
		}
		rt.Repeat(actions)
	})
	deleteKeys(t, rdb, prefix)
}

type diffModel struct {
	calls     int // distinct calls: c0, c1, ...
	clock     *capacitytest.ManualClock
	mem       capacity.Store
	rs        capacity.Store
	lua       *Store // rs, on the scripts (their batches); nil on the records engine
	limits    capacity.Limits
	on        [capacity.NumDimensions]bool // which dimensions are limited
	memL, rsL map[string]capacity.Lease    // live leases by call, as each store granted them
	retryAt   time.Time
	booked    map[string]capacity.Request // the last booked request by call
	bookedAt  map[string]time.Time        // and its ticket's time
}

var diffScope = capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "diff"}

// drawLimits draws new values for the limited dimensions. Which dimensions
// are limited never changes: MemoryStore.unbook leaks booked capacity when a
// bucket's limited status changes while a ticket is out (this store keeps
// the exact sum; see unbook in lua/state.lua).
func (m *diffModel) drawLimits(t *rapid.T) capacity.Limits {
	lim := func(d capacity.Dimension, lo, hi int64) int64 {
		if m.on[d] {
			return rapid.Int64Range(lo, hi).Draw(t, d.String())
		}
		return 0
	}
	var tokenBurst int64
	if rapid.Bool().Draw(t, "tokenburst-on") {
		tokenBurst = rapid.Int64Range(100, 5000).Draw(t, "tokenburst")
	}
	var standardFloor, bulkFloor float64
	if rapid.Bool().Draw(t, "floors-on") {
		standardFloor = rapid.Float64Range(0, 0.4).Draw(t, "standard-floor")
		bulkFloor = standardFloor + rapid.Float64Range(0, 0.4).Draw(t, "bulk-floor-extra")
	}
	var aging time.Duration
	if rapid.Bool().Draw(t, "aging-on") {
		aging = time.Duration(rapid.IntRange(1, 20000).Draw(t, "aging-ms")) * time.Millisecond
	}
	return capacity.Limits{
		RequestsPerMinute:     lim(capacity.Requests, 6, 600),
		InputTokensPerMinute:  lim(capacity.InputTokens, 600, 60000),
		OutputTokensPerMinute: lim(capacity.OutputTokens, 600, 60000),
		TokensPerMinute:       lim(capacity.Tokens, 1200, 120000),
		RequestsPerDay:        lim(capacity.RequestsPerDay, 1, 50),
		TokensPerDay:          lim(capacity.TokensPerDay, 1000, 200000),
		MaxInFlight:           lim(capacity.InFlight, 1, 4),
		Burst:                 time.Duration(rapid.IntRange(0, 10).Draw(t, "burst-s")) * time.Second,
		TokenBurst:            tokenBurst,
		SafetyMargin:          rapid.SampledFrom([]float64{0, 1, 0.5, 0.9}).Draw(t, "margin"),
		StandardFloor:         standardFloor,
		BulkFloor:             bulkFloor,
		AgingAfter:            aging,
	}
}

func (m *diffModel) call(t *rapid.T) string {
	return fmt.Sprintf("c%d", rapid.IntRange(0, m.calls-1).Draw(t, "call"))
}

// crowd sends a booking reserve for each of the next n calls, up to every
// call: with many calls, tickets pile up beyond the first.
func (m *diffModel) crowd(t *rapid.T) {
	first := rapid.IntRange(0, m.calls-1).Draw(t, "crowd-first")
	for i := range rapid.IntRange(1, m.calls).Draw(t, "crowd-size") {
		req := m.drawRequest(t)
		req.Call, req.Book = fmt.Sprintf("c%d", (first+i)%m.calls), true
		m.send(t, req)
	}
}

func (m *diffModel) reserve(t *rapid.T) {
	m.send(t, m.drawRequest(t))
}

// drawRequest draws a reserve request on the scope.
func (m *diffModel) drawRequest(t *rapid.T) capacity.Request {
	most := rapid.SampledFrom([]int64{3000, 100}).Draw(t, "most-tokens")
	in, out := rapid.Int64Range(0, most).Draw(t, "in"), rapid.Int64Range(0, most).Draw(t, "out")
	var c capacity.Charges
	c[capacity.Requests], c[capacity.RequestsPerDay], c[capacity.InFlight] = 1, 1, 1
	c[capacity.InputTokens], c[capacity.OutputTokens], c[capacity.Tokens], c[capacity.TokensPerDay] = in, out, in+out, in+out
	req := capacity.Request{
		Scope: diffScope, Limits: m.limits, Call: m.call(t), Attempt: rapid.IntRange(1, 3).Draw(t, "attempt"),
		Charges: c, Class: capacity.Class(rapid.IntRange(0, 2).Draw(t, "class")),
		TTL:  time.Duration(rapid.IntRange(1, 20).Draw(t, "ttl-s")) * time.Second,
		Book: rapid.Bool().Draw(t, "book"),
	}
	if rapid.Bool().Draw(t, "has-since") {
		req.Since = m.clock.Now().Add(-time.Duration(rapid.IntRange(0, 60000).Draw(t, "since-ms")) * time.Millisecond)
	}
	if rapid.Bool().Draw(t, "has-deadline") {
		req.Deadline = m.clock.Now().Add(time.Duration(rapid.IntRange(0, 10000).Draw(t, "deadline-ms")) * time.Millisecond)
	}
	if rapid.Bool().Draw(t, "keyed") {
		req.Fairness = capacity.Fairness{
			Key:    rapid.SampledFrom([]string{"a", "b", "tenant-c"}).Draw(t, "key"),
			Weight: rapid.SampledFrom([]float64{0, 1, 3, 0.5}).Draw(t, "key-weight"),
		}
		req.FairStart = rapid.SampledFrom([]time.Duration{0, 0, 200 * time.Millisecond, time.Second}).Draw(t, "fair-start")
		if rapid.IntRange(0, 2).Draw(t, "capped") == 0 {
			req.Fairness.Share = rapid.SampledFrom([]float64{0, 0.25, 1}).Draw(t, "share")
			req.Fairness.TokensPerDay = rapid.SampledFrom([]int64{0, 500, 5000}).Draw(t, "key-tokens-per-day")
		}
	}
	if rapid.IntRange(0, 3).Draw(t, "ruled") == 0 {
		req.Rule = &capacity.ClassRule{
			Rank:   rapid.IntRange(0, capacity.MaxRank).Draw(t, "rank"),
			Floor:  rapid.SampledFrom([]float64{0, 0.2}).Draw(t, "rule-floor"),
			Weight: rapid.SampledFrom([]float64{0, 1, 2}).Draw(t, "class-weight"),
		}
	}
	return req
}

// claim sends a booked call's request again, at its ticket's time or now:
// under class rules a higher class may have borrowed the ticket's capacity.
func (m *diffModel) claim(t *rapid.T) {
	if len(m.booked) == 0 {
		t.Skip()
	}
	calls := slices.Sorted(maps.Keys(m.booked))
	req := m.booked[rapid.SampledFrom(calls).Draw(t, "booked-call")]
	if at := m.bookedAt[req.Call]; rapid.Bool().Draw(t, "at-retry") && at.After(m.clock.Now()) {
		m.clock.Set(at)
	}
	m.send(t, req)
}

// send reserves req in both stores and requires the same answer.
func (m *diffModel) send(t *rapid.T, req capacity.Request) {
	ctx := context.Background()
	a, errA := m.mem.Reserve(ctx, req)
	b, errB := m.rs.Reserve(ctx, req)
	m.same(t, req, a, errA, b, errB)
}

// same requires the same answer to req from both stores.
func (m *diffModel) same(t *rapid.T, req capacity.Request, a capacity.Reservation, errA error, b capacity.Reservation, errB error) {
	sameError(t, errA, errB)
	if errA != nil {
		return
	}
	require.Equal(t, a.Granted, b.Granted, "granted: memory %+v, redis %+v", a, b)
	require.Equal(t, a.Probe, b.Probe)
	require.True(t, a.Now.Equal(b.Now))
	if a.Granted {
		sameLease(t, a.Lease, b.Lease)
		m.memL[req.Call], m.rsL[req.Call] = a.Lease, b.Lease
		return
	}
	require.Equal(t, a.Reason, b.Reason, "reason: memory %+v, redis %+v", a, b)
	require.Equal(t, a.Binding, b.Binding)
	require.Equal(t, a.Booked, b.Booked)
	sameBlock(t, a.Block, b.Block)
	// Redis rounds waits up to the microsecond, memory to the nanosecond.
	d := b.RetryAt.Sub(a.RetryAt)
	require.True(t, d >= 0 && d < time.Microsecond, "retryAt: memory %v, redis %v", a.RetryAt, b.RetryAt)
	m.retryAt = b.RetryAt
	if b.Booked {
		m.booked[req.Call], m.bookedAt[req.Call] = req, b.RetryAt
	}
}

func (m *diffModel) pick(t *rapid.T) (capacity.Lease, capacity.Lease, bool) {
	call := m.call(t)
	a, ok := m.memL[call]
	if !ok {
		return a, a, false
	}
	return a, m.rsL[call], true
}

func (m *diffModel) settle(t *rapid.T) {
	a, b, ok := m.pick(t)
	if !ok {
		t.Skip()
	}
	final := drawFinal(t, a)
	ctx := context.Background()
	sameError(t, m.mem.Settle(ctx, a, final), m.rs.Settle(ctx, b, final))
	if rapid.Bool().Draw(t, "forget") {
		delete(m.memL, a.Call)
		delete(m.rsL, a.Call)
	}
}

// drawFinal draws what a lease's call used.
func drawFinal(t *rapid.T, le capacity.Lease) capacity.Charges {
	final := le.Charges
	for d := capacity.InputTokens; d <= capacity.Tokens; d++ {
		final[d] = rapid.Int64Range(0, le.Charges[d]*2+10).Draw(t, "final")
	}
	return final
}

// batch sends a few reserves, settles, releases and observations to the
// Redis store as one batch (one script at one time, as concurrent calls go)
// and to the memory store one after the other: every answer must be the
// same as if each ran alone. (A batch's releases leave the tickets' retime
// to its next operation of another kind: the answers must not show it.)
func (m *diffModel) batch(t *rapid.T) {
	if m.lua == nil {
		t.Skip()
	}
	ctx := context.Background()
	k := m.lua.keysFor(diffScope)
	type sent struct {
		req    capacity.Request // a reserve's
		memRes capacity.Reservation
		memErr error
	}
	var ops []*op
	var items []sent
	for range rapid.IntRange(2, 6).Draw(t, "batch-size") {
		if rapid.IntRange(0, 3).Draw(t, "batch-observe") == 0 {
			o, ob := m.drawObservation(t)
			items = append(items, sent{memErr: m.mem.Observe(ctx, diffScope, o)})
			ops = append(ops, m.lua.observeOp(ctx, k, ob))
			continue
		}
		if rapid.IntRange(0, 3).Draw(t, "batch-release") == 0 {
			le := capacity.Lease{Scope: diffScope, Call: m.call(t)} // a ticket's release
			rle := le
			if a, b, ok := m.pick(t); ok && rapid.Bool().Draw(t, "batch-release-lease") {
				le, rle = a, b
			}
			items = append(items, sent{memErr: m.mem.Release(ctx, le)})
			ops = append(ops, m.lua.releaseOp(ctx, k, rle))
			continue
		}
		if a, b, ok := m.pick(t); ok && rapid.Bool().Draw(t, "batch-settle") {
			final := drawFinal(t, a)
			items = append(items, sent{memErr: m.mem.Settle(ctx, a, final)})
			ops = append(ops, m.lua.settleOp(ctx, k, b, final))
			continue
		}
		req := m.drawRequest(t)
		res, err := m.mem.Reserve(ctx, req)
		if err != nil && validateRequest(req) != nil {
			continue // refused before any batch
		}
		items = append(items, sent{req: req, memRes: res, memErr: err})
		ops = append(ops, m.lua.reserveOp(ctx, k, req))
	}
	if len(ops) == 0 {
		t.Skip()
	}
	runOps(m.lua, k, ops)
	for i, o := range ops {
		it := items[i]
		if o.code != opReserve { // a settle, a release or an observe
			err := o.err
			if kind := o.res.str(); err == nil && kind != "ok" && kind != "gone" {
				err = fmt.Errorf("settle: %q %v", kind, o.res.err)
			}
			sameError(t, it.memErr, err)
			continue
		}
		var res capacity.Reservation
		err := o.err
		if err == nil {
			res, _, err = parseReserve(o.res, o.h, it.req)
		}
		m.same(t, it.req, it.memRes, it.memErr, res, err)
	}
}

func (m *diffModel) release(t *rapid.T) {
	a, b, ok := m.pick(t)
	if !ok {
		t.Skip()
	}
	ctx := context.Background()
	sameError(t, m.mem.Release(ctx, a), m.rs.Release(ctx, b))
}

func (m *diffModel) releaseTicket(t *rapid.T) {
	le := capacity.Lease{Scope: diffScope, Call: m.call(t)}
	ctx := context.Background()
	sameError(t, m.mem.Release(ctx, le), m.rs.Release(ctx, le))
}

func (m *diffModel) renew(t *rapid.T) {
	a, b, ok := m.pick(t)
	if !ok {
		t.Skip()
	}
	// Renewals only extend here: MemoryStore.Renew does not lower its next
	// expiry, so a renewal that shortens a lease keeps it (and its slot)
	// past its new expiry there; this store reclaims it on time.
	ttl := time.Duration(rapid.IntRange(20, 40).Draw(t, "ttl-s")) * time.Second
	ctx := context.Background()
	la, errA := m.mem.Renew(ctx, a, ttl)
	lb, errB := m.rs.Renew(ctx, b, ttl)
	sameError(t, errA, errB)
	if errA == nil {
		sameLease(t, la, lb)
	}
}

func (m *diffModel) observe(t *rapid.T) {
	o, ob := m.drawObservation(t)
	ctx := context.Background()
	sameError(t, m.mem.Observe(ctx, diffScope, o), m.rs.Observe(ctx, diffScope, ob))
}

// drawObservation draws what a response reported, for each store (with
// the mark of a lease each granted).
func (m *diffModel) drawObservation(t *rapid.T) (capacity.Observation, capacity.Observation) {
	var o capacity.Observation
	for d := capacity.Requests; d <= capacity.Tokens; d++ {
		if rapid.Bool().Draw(t, "dim-"+d.String()) {
			o.Dims[d] = capacity.DimensionObservation{
				// A reported limit on an unlimited dimension would make it
				// limited (see drawLimits).
				HasLimit: m.on[d] && rapid.Bool().Draw(t, "has-limit"), Limit: rapid.Int64Range(0, 100000).Draw(t, "limit"),
				HasRemaining: rapid.Bool().Draw(t, "has-remaining"), Remaining: rapid.Int64Range(-10, 100000).Draw(t, "remaining"),
				InFlightExcluded: rapid.Bool().Draw(t, "in-flight-excluded"),
			}
		}
	}
	ob := o
	if a, b, ok := m.pick(t); ok && rapid.Bool().Draw(t, "mark") {
		o.Mark, ob.Mark = a.Mark, b.Mark
	}
	return o, ob
}

func (m *diffModel) block(t *rapid.T) {
	b := capacity.Block{
		Reason:     capacity.BlockReason(rapid.IntRange(1, 4).Draw(t, "reason")),
		Until:      m.clock.Now().Add(time.Duration(rapid.IntRange(-2000, 8000).Draw(t, "until-ms")) * time.Millisecond),
		Credential: rapid.Bool().Draw(t, "credential"),
		Detail:     rapid.SampledFrom([]string{"", "quota x", "429"}).Draw(t, "detail"),
	}
	if rapid.Bool().Draw(t, "half-open") {
		b.HalfOpen = time.Duration(rapid.IntRange(1, 10).Draw(t, "half-open-s")) * time.Second
	}
	ctx := context.Background()
	sameError(t, m.mem.Block(ctx, diffScope, b), m.rs.Block(ctx, diffScope, b))
}

func (m *diffModel) unblock(t *rapid.T) {
	cred := rapid.Bool().Draw(t, "credential")
	ctx := context.Background()
	sameError(t, m.mem.Unblock(ctx, diffScope, cred), m.rs.Unblock(ctx, diffScope, cred))
}

func (m *diffModel) compare(t *rapid.T) {
	ctx := context.Background()
	a, errA := m.mem.Snapshot(ctx, diffScope)
	b, errB := m.rs.Snapshot(ctx, diffScope)
	require.NoError(t, errA)
	require.NoError(t, errB)
	sameSnapshot(t, a, b)
}

func sameError(t *rapid.T, a, b error) {
	t.Helper()
	if a == nil || b == nil {
		require.Equal(t, a == nil, b == nil, "errors: memory %v, redis %v", a, b)
		return
	}
	for _, target := range []error{capacity.ErrDemandTooLarge, capacity.ErrStaleAttempt, capacity.ErrLeaseNotFound, capacity.ErrInvalidRequest} {
		require.Equal(t, errors.Is(a, target), errors.Is(b, target), "errors: memory %v, redis %v", a, b)
	}
	var ta, tb *capacity.DemandTooLargeError
	if errors.As(a, &ta) && errors.As(b, &tb) {
		require.Equal(t, *ta, *tb)
	}
}

func sameLease(t *rapid.T, a, b capacity.Lease) {
	t.Helper()
	ma, mb := a.Mark, b.Mark
	a.Mark, b.Mark = capacity.Mark{}, capacity.Mark{}
	require.True(t, a.GrantedAt.Equal(b.GrantedAt) && a.Expires.Equal(b.Expires), "times: memory %v, redis %v", a, b)
	a.GrantedAt, b.GrantedAt, a.Expires, b.Expires = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	require.Equal(t, a, b)
	require.Equal(t, ma.Valid, mb.Valid)
	require.Equal(t, ma.Seq, mb.Seq, "grant numbers")
	for d := range ma.Granted {
		require.InDelta(t, ma.Granted[d], mb.Granted[d], 1e-6)
	}
}

func sameBlock(t *rapid.T, a, b capacity.Block) {
	t.Helper()
	require.True(t, a.Until.Equal(b.Until), "block until: memory %v, redis %v", a.Until, b.Until)
	a.Until, b.Until = time.Time{}, time.Time{}
	require.Equal(t, a, b)
}

func sameSnapshot(t *rapid.T, a, b capacity.Snapshot) {
	t.Helper()
	require.True(t, a.Now.Equal(b.Now))
	for d := range a.Level {
		require.InDelta(t, a.Level[d], b.Level[d], 1e-6*math.Max(1, math.Abs(a.Level[d])), "level of %s", capacity.Dimension(d))
		require.Equal(t, a.Budget[d].Limited, b.Budget[d].Limited)
		require.InDelta(t, a.Budget[d].Rate, b.Budget[d].Rate, 1e-9)
		require.InDelta(t, a.Budget[d].Capacity, b.Budget[d].Capacity, 1e-9)
	}
	require.Equal(t, a.Limits, b.Limits)
	require.True(t, a.DayResetAt.Equal(b.DayResetAt), "day reset: memory %v, redis %v", a.DayResetAt, b.DayResetAt)
	require.Equal(t, len(a.Leases), len(b.Leases), "leases: memory %v, redis %v", a.Leases, b.Leases)
	for i := range a.Leases {
		sameLease(t, a.Leases[i], b.Leases[i])
	}
	require.Equal(t, len(a.Tickets), len(b.Tickets), "tickets: memory %v, redis %v", a.Tickets, b.Tickets)
	// A call has one ticket: they are compared call by call (no order is
	// promised, and times a nanosecond apart in memory may share Redis's
	// microsecond).
	byCall := func(x, y capacity.Ticket) int { return strings.Compare(x.Call, y.Call) }
	slices.SortFunc(a.Tickets, byCall)
	slices.SortFunc(b.Tickets, byCall)
	for i := range a.Tickets {
		ta, tb := a.Tickets[i], b.Tickets[i]
		d := tb.At.Sub(ta.At)
		require.True(t, d >= 0 && d < time.Microsecond, "ticket at: memory %v, redis %v", ta.At, tb.At)
		d = tb.Expires.Sub(ta.Expires)
		require.True(t, d >= 0 && d < time.Microsecond, "ticket expires: memory %v, redis %v", ta.Expires, tb.Expires)
		ta.At, tb.At, ta.Expires, tb.Expires = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		require.Equal(t, ta, tb)
	}
	require.Equal(t, len(a.Blocks), len(b.Blocks), "blocks: memory %v, redis %v", a.Blocks, b.Blocks)
	for i := range a.Blocks {
		sameBlock(t, a.Blocks[i], b.Blocks[i])
	}
	require.Equal(t, a.Flows, b.Flows, "flows")
	require.Equal(t, len(a.Keys), len(b.Keys), "keys: memory %v, redis %v", a.Keys, b.Keys)
	for i := range a.Keys {
		ka, kb := a.Keys[i], b.Keys[i]
		require.True(t, ka.DayEnd.Equal(kb.DayEnd), "key day end: memory %v, redis %v", ka.DayEnd, kb.DayEnd)
		ka.DayEnd, kb.DayEnd = time.Time{}, time.Time{}
		require.Equal(t, ka, kb)
	}
}

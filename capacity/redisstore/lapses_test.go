package redisstore

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// TestLapsesInSeveralScripts books more calls than one script reclaims
// (tuning.MaxReclaim), tenants' tickets interleaved, lets a part of them
// lapse and then all, and requires the Redis store, which reclaims them over
// several scripts, to answer and end as the memory store does, which
// reclaims them at once: the same slots and levels, and each tenant's flow
// finishing where one unplaceAll of its lapsed tickets leaves it
// (fair.unplaceAll's links).
func TestLapsesInSeveralScripts(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	grace := time.Second
	run := 0
	var again int64
	rapid.Check(t, func(rt *rapid.T) {
		run++
		clock := capacitytest.NewManualClock(storetest.Epoch)
		rs, err := New(rdb, Options{Engine: EngineScripts, Prefix: fmt.Sprintf("%s:%d", prefix, run), Clock: clock, TicketGrace: grace})
		require.NoError(rt, err)
		defer func() { _ = rs.Close() }()
		m := &diffModel{
			clock:    clock,
			mem:      capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock, TicketGrace: grace}),
			rs:       rs,
			memL:     map[string]capacity.Lease{},
			rsL:      map[string]capacity.Lease{},
			booked:   map[string]capacity.Request{},
			bookedAt: map[string]time.Time{},
			limits: capacity.Limits{
				RequestsPerMinute: rapid.SampledFrom([]int64{600, 1200, 2400}).Draw(rt, "rpm"),
			},
		}
		tenants := rapid.IntRange(1, 4).Draw(rt, "tenants")
		weights := []float64{1, 3, 0.5, 2}
		one := capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}
		n := rapid.IntRange(tuning.MaxReclaim+1, 4*tuning.MaxReclaim).Draw(rt, "calls")
		ttl := time.Duration(rapid.IntRange(1, 20).Draw(rt, "lease-ttl-s")) * time.Second
		request := func(call string, i int) capacity.Request {
			return capacity.Request{
				Scope: diffScope, Limits: m.limits, Call: call, Attempt: 1, Charges: one, Book: true, TTL: ttl,
				Class:    capacity.Class(rapid.IntRange(0, 2).Draw(rt, "class")),
				Fairness: capacity.Fairness{Key: fmt.Sprint("tenant-", i%tenants), Weight: weights[i%tenants]},
			}
		}
		// Tickets that lapse at one time are reclaimed in the reverse order
		// of their calls' names: the names put a tenant's later tickets
		// first (padded), last (padded, counting down), or mixed.
		naming := rapid.SampledFrom([]string{"mixed", "later-first", "later-last"}).Draw(rt, "naming")
		name := func(i int) string {
			switch naming {
			case "later-first":
				return fmt.Sprintf("c%04d", i)
			case "later-last":
				return fmt.Sprintf("c%04d", n-i)
			}
			return fmt.Sprint("c", i)
		}
		// A report of a lower level pushes the first tickets back, past
		// those behind them, which keep their times (lua/ops.lua): a
		// tenant's tickets then lapse out of their order.
		ctx := context.Background()
		report := func() {
			var o capacity.Observation
			o.Dims[capacity.Requests] = capacity.DimensionObservation{HasRemaining: true, Remaining: rapid.Int64Range(0, 20).Draw(rt, "remaining")}
			require.NoError(rt, m.mem.Observe(ctx, diffScope, o))
			require.NoError(rt, m.rs.Observe(ctx, diffScope, o))
		}
		for i := range n {
			m.send(rt, request(name(i), i))
			switch rapid.IntRange(0, 15).Draw(rt, "between") {
			case 0:
				clock.Advance(time.Duration(rapid.IntRange(1, 500).Draw(rt, "pause-ms")) * time.Millisecond)
			case 1:
				report()
			}
		}
		report()
		m.compare(rt)
		// A call decides once every lapsed ticket is reclaimed, and the
		// last script of a reclaim deletes the links left.
		links := rs.keysFor(diffScope).keys[keyLapsing]
		reclaimed := func() {
			m.compare(rt)
			require.Zero(rt, rdb.Exists(ctx, links).Val(), "links left after the reclaim")
		}
		// The first script to run reclaims: a reserve's, a renewal's or a
		// cooldown's.
		reclaim := func(call string, i int) {
			switch rapid.SampledFrom([]string{"reserve", "renew", "cooldown"}).Draw(rt, "first-script") {
			case "renew":
				call := rapid.SampledFrom(slices.Sorted(maps.Keys(m.memL))).Draw(rt, "lease")
				a, errA := m.mem.Renew(ctx, m.memL[call], time.Minute)
				b, errB := m.rs.Renew(ctx, m.rsL[call], time.Minute)
				sameError(rt, errA, errB)
				if errA == nil {
					sameLease(rt, a, b)
				}
			case "cooldown":
				blk := capacity.Block{Reason: capacity.Cooldown, Until: clock.Now().Add(2 * time.Second)}
				sameError(rt, m.mem.Block(ctx, diffScope, blk), m.rs.Block(ctx, diffScope, blk))
			}
			m.send(rt, request(call, i))
			reclaimed()
		}
		// Some leases expire and the first tickets lapse; then all.
		clock.Advance(time.Duration(rapid.IntRange(0, 20_000).Draw(rt, "first-ms")) * time.Millisecond)
		reclaim("next", 0)
		clock.Advance(time.Hour)
		reclaim("last", 1)
		again += rs.Stats().ReclaimScripts
	})
	require.Positive(t, again, "some calls found more lapsed than one script reclaims")
	deleteKeys(t, rdb, prefix)
}

// TestLapsingLinksAcrossVersions: scripts 6.2 reclaim every lapsed ticket
// at once and keep the state's fields they do not know, so links that a
// 6.3 script kept in the middle of a reclaim outlive it when a 6.2 worker
// finishes the reclaim. The next 6.3 script must drop them (load, in
// lua/state.lua), or a later reclaim would follow them.
func TestLapsingLinksAcrossVersions(t *testing.T) {
	clock := capacitytest.NewManualClock(storetest.Epoch)
	grace := time.Second
	newer, rdb := newTestStore(t, Options{Engine: EngineScripts, Clock: clock, TicketGrace: grace})
	older, err := New(rdb, Options{Engine: EngineScripts, Prefix: newer.opts.Prefix, Clock: clock, TicketGrace: grace})
	require.NoError(t, err)
	t.Cleanup(func() { _ = older.Close() })
	older.scripts, err = loadScripts(os.DirFS("testdata/scripts-v6.2"), ".")
	require.NoError(t, err)
	ctx := context.Background()
	l := capacity.Limits{RequestsPerMinute: 600}
	request := func(i int) capacity.Request {
		return capacity.Request{Scope: diffScope, Limits: l, Call: fmt.Sprint("c", i), Attempt: 1, Book: true,
			Charges:  capacity.Charges{capacity.Requests: 1},
			Fairness: capacity.Fairness{Key: fmt.Sprint("tenant-", i%2)}}
	}
	for i := range 250 { // 47 granted at once, then a ticket every 105 ms
		_, err := newer.Reserve(ctx, request(i))
		require.NoError(t, err)
	}
	// About 150 tickets lapse, each tenant's latest not: the first script
	// reclaims 64 and keeps links for them all.
	clock.Advance(17 * time.Second)
	k := newer.keysFor(diffScope)
	first, err := newer.call(ctx, newer.scripts.ops, k.keys, newer.batchArgs(k, []*op{newer.reserveOp(ctx, k, request(1000))}), false).Slice()
	require.NoError(t, err)
	require.Equal(t, "A", first[0], "the first script only reclaimed")
	links := k.keys[keyLapsing]
	require.Positive(t, rdb.HLen(ctx, links).Val(), "links kept")
	// A 6.2 worker reclaims the rest at once, and keeps the links.
	_, err = older.Reserve(ctx, request(1001))
	require.NoError(t, err)
	require.Positive(t, rdb.HLen(ctx, links).Val())
	_, err = newer.Reserve(ctx, request(1002))
	require.NoError(t, err)
	require.Zero(t, rdb.Exists(ctx, links).Val(), "stale links dropped")
}

// TestReclaimBeforeDeciding: a renewal, a cooldown and a reserve that find
// more leases expired and tickets lapsed than one script reclaims decide
// only once every one is reclaimed, as the memory store does: an expired
// lease is not renewed, and the cooldown and the reserve see every slot
// and charge come back.
func TestReclaimBeforeDeciding(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	grace := time.Second
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		clock := capacitytest.NewManualClock(storetest.Epoch)
		rs, err := New(rdb, Options{Engine: EngineScripts, Prefix: fmt.Sprintf("%s:%d", prefix, run), Clock: clock, TicketGrace: grace})
		require.NoError(rt, err)
		defer func() { _ = rs.Close() }()
		m := &diffModel{
			clock:  clock,
			mem:    capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock, TicketGrace: grace}),
			rs:     rs,
			memL:   map[string]capacity.Lease{},
			rsL:    map[string]capacity.Lease{},
			booked: map[string]capacity.Request{}, bookedAt: map[string]time.Time{},
			limits: capacity.Limits{RequestsPerMinute: 1200}, // 95 granted at once, then booked
		}
		one := capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}
		request := func(i int) capacity.Request {
			return capacity.Request{Scope: diffScope, Limits: m.limits, Call: fmt.Sprintf("c%03d", i), Attempt: 1, Charges: one,
				Book: true, TTL: 5 * time.Second, Fairness: capacity.Fairness{Key: fmt.Sprint("tenant-", i%3)}}
		}
		for i := range 200 {
			m.send(rt, request(i))
		}
		clock.Advance(time.Duration(rapid.IntRange(5, 60).Draw(rt, "after-s")) * time.Second)
		ctx := context.Background()
		before := rs.Stats().ReclaimScripts
		switch rapid.SampledFrom([]string{"renew", "cooldown", "reserve"}).Draw(rt, "first-script") {
		case "renew":
			call := rapid.SampledFrom(slices.Sorted(maps.Keys(m.memL))).Draw(rt, "lease")
			_, errA := m.mem.Renew(ctx, m.memL[call], time.Minute)
			_, errB := m.rs.Renew(ctx, m.rsL[call], time.Minute)
			require.ErrorIs(rt, errA, capacity.ErrLeaseNotFound)
			require.ErrorIs(rt, errB, capacity.ErrLeaseNotFound)
		case "cooldown":
			blk := capacity.Block{Reason: capacity.Cooldown, Until: clock.Now().Add(2 * time.Second)}
			sameError(rt, m.mem.Block(ctx, diffScope, blk), m.rs.Block(ctx, diffScope, blk))
		case "reserve":
			m.send(rt, request(1000))
		}
		require.Greater(rt, rs.Stats().ReclaimScripts, before, "sent again while it reclaimed")
		m.compare(rt)
	})
	deleteKeys(t, rdb, prefix)
}

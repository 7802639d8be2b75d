package capacity_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
)

// TestSummaryMatchesSnapshot (rapid): the memory store's Summary, which
// reads the scope's budgets without copying its leases and tickets while
// none expired unreclaimed, says what its Snapshot's Summary says, through
// grants, bookings, settles, releases, reports, cooldowns and time
// passing (leases expiring and tickets lapsing among them).
func TestSummaryMatchesSnapshot(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clock := capacitytest.NewManualClock(time.Unix(1_700_000_000, 0))
		store := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock, TicketGrace: 100 * time.Millisecond})
		ctx := context.Background()
		limits := capacity.Limits{RequestsPerMinute: 120, TokensPerMinute: 60_000, MaxInFlight: 8, RequestsPerDay: 500}
		leases := map[string]capacity.Lease{}
		call := func(t *rapid.T) string { return fmt.Sprint("c", rapid.IntRange(0, 15).Draw(t, "call")) }
		t.Repeat(map[string]func(*rapid.T){
			"reserve": func(t *rapid.T) {
				tokens := rapid.Int64Range(0, 20_000).Draw(t, "tokens")
				res, err := store.Reserve(ctx, capacity.Request{Scope: propScope, Limits: limits, Call: call(t), Attempt: 1,
					Charges: capacity.Charges{capacity.Requests: 1, capacity.Tokens: tokens, capacity.InFlight: 1, capacity.RequestsPerDay: 1},
					Book:    rapid.Bool().Draw(t, "book"), TTL: time.Duration(rapid.IntRange(1, 30).Draw(t, "ttl-s")) * time.Second,
					Class: capacity.Class(rapid.IntRange(0, 2).Draw(t, "class"))})
				if err == nil && res.Granted {
					leases[res.Lease.Call] = res.Lease
				}
			},
			"settle": func(t *rapid.T) {
				if le, ok := leases[call(t)]; ok {
					require.NoError(t, store.Settle(ctx, le, le.Charges))
					delete(leases, le.Call)
				}
			},
			"release": func(t *rapid.T) {
				require.NoError(t, store.Release(ctx, capacity.Lease{Scope: propScope, Call: call(t)}))
			},
			"report": func(t *rapid.T) {
				var o capacity.Observation
				o.Dims[capacity.Tokens] = capacity.DimensionObservation{HasLimit: true, Limit: rapid.Int64Range(1000, 100_000).Draw(t, "limit"),
					HasRemaining: true, Remaining: rapid.Int64Range(0, 60_000).Draw(t, "remaining")}
				require.NoError(t, store.Observe(ctx, propScope, o))
			},
			"cooldown": func(t *rapid.T) {
				require.NoError(t, store.Block(ctx, propScope, capacity.Block{Reason: capacity.Cooldown, Until: clock.Now().Add(time.Second)}))
			},
			"advance": func(t *rapid.T) {
				clock.Advance(time.Duration(rapid.IntRange(0, 40_000).Draw(t, "ms")) * time.Millisecond)
			},
			"": func(t *rapid.T) {
				c := rapid.SampledFrom([]string{"", "c0", "c1", "c2"}).Draw(t, "summary-call")
				got, err := store.Summary(ctx, propScope, c)
				require.NoError(t, err)
				snap, err := store.Snapshot(ctx, propScope)
				require.NoError(t, err)
				require.Equal(t, snap.Summary(c), got)
			},
		})
	})
}

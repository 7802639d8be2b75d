package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
)

// setGrants sets the grant count of sc's state in Redis to n (test only:
// the next lease granted is numbered n + 1), so that a test reaches the
// upper levels of the live sums without granting tens of thousands of
// leases.
func setGrants(t *testing.T, s *Store, sc capacity.Scope, n int64) {
	t.Helper()
	const script = `local p = cmsgpack.unpack(redis.call('HGET', KEYS[1], 'packed'))
p.grants = tonumber(ARGV[1])
redis.call('HSET', KEYS[1], 'packed', cmsgpack.pack(p))
return 1`
	require.NoError(t, s.rdb.Eval(context.Background(), script, []string{s.keysFor(sc).keys[keyState]}, n).Err())
}

// TestLiveSums: what a report counts of the leases in flight, which the
// Redis store reads from sums by grant number (lua/state.lua,
// index.liveBefore) and the memory store from its leases, is the same
// through every level of the sums: leases numbered across a boundary of
// each level, the lowest ones ended (so the top level's first field
// empties), reports of a remaining with calls in flight and without, and
// marks of live leases, ended ones, none, and one from before grant
// numbers.
func TestLiveSums(t *testing.T) {
	for _, first := range []int64{1, 16*16 - 20, 16*16*16 - 30, 16*16*16*16 - 30} {
		t.Run(fmt.Sprintf("second=%d", first+1), func(t *testing.T) {
			start := time.Now().Truncate(time.Second)
			redisClock, memClock := capacitytest.NewManualClock(start), capacitytest.NewManualClock(start)
			rs, _ := newTestStore(t, Options{Clock: redisClock})
			ms := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: memClock})
			ctx := context.Background()
			sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "m", Credential: "livesums"}
			l := capacity.Limits{TokensPerMinute: 6_000_000, RequestsPerMinute: 600_000, SafetyMargin: 1}
			stores := []capacity.Store{rs, ms}
			var leases [][2]capacity.Lease
			grant := func(i int) {
				t.Helper()
				var got [2]capacity.Lease
				for k, s := range stores {
					res, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: fmt.Sprint("c", i), Attempt: 1, TTL: time.Hour,
						Charges: capacity.Charges{capacity.Requests: 1, capacity.Tokens: int64(1000 + 37*i), capacity.InFlight: 1}})
					require.NoError(t, err)
					require.True(t, res.Granted, "c%d: %+v", i, res)
					got[k] = res.Lease
				}
				leases = append(leases, got)
			}
			grant(0)
			setGrants(t, rs, sc, first)
			for i := 1; i < 60; i++ {
				grant(i)
			}
			require.Equal(t, first+59, leases[59][0].Mark.Seq, "the Redis store numbers on from the count set")
			// Then leases two top fields further: a report of one of them
			// reads each top field below its own.
			setGrants(t, rs, sc, first+2*16*16*16*16)
			for i := 60; i < 70; i++ {
				grant(i)
			}
			levels := func() [2]float64 {
				var out [2]float64
				for k, s := range stores {
					snap, err := s.Snapshot(ctx, sc)
					require.NoError(t, err)
					out[k] = snap.Level[capacity.Tokens]
				}
				return out
			}
			report := func(name string, excluded bool, mark func(k int) capacity.Mark) {
				t.Helper()
				for k, s := range stores {
					var o capacity.Observation
					o.Dims[capacity.Tokens] = capacity.DimensionObservation{HasLimit: true, Limit: 6_000_000,
						HasRemaining: true, Remaining: 480_000, InFlightExcluded: excluded}
					o.Mark = mark(k)
					require.NoError(t, s.Observe(ctx, sc, o))
				}
				got := levels()
				require.InDelta(t, got[1], got[0], 1e-6, "%s: the Redis store's level, then the memory store's", name)
				// Lower both again, so that the next report raises them.
				for _, s := range stores {
					var o capacity.Observation
					o.Dims[capacity.Tokens] = capacity.DimensionObservation{HasLimit: true, Limit: 6_000_000, HasRemaining: true, Remaining: 1000}
					require.NoError(t, s.Observe(ctx, sc, o))
				}
			}
			ended := map[int]bool{}
			end := func(i int) {
				if ended[i] {
					return
				}
				ended[i] = true
				for k, s := range stores {
					require.NoError(t, s.Settle(ctx, leases[i][k], leases[i][k].Charges))
				}
			}
			// End the lowest ones and every third, then every lease of the
			// first 30: in the last case, every one below the top level's
			// boundary.
			for _, ends := range []func(i int) bool{
				func(i int) bool { return i < 12 || i%3 == 0 },
				func(i int) bool { return i < 30 },
			} {
				for i := range leases {
					if ends(i) {
						end(i)
					}
				}
				for _, i := range []int{13, 14, 15, 20, 29, 30, 31, 45, 58, 59, 60, 65, 69, 3, 0} {
					for _, excluded := range []bool{false, true} {
						report(fmt.Sprintf("c%d excluded=%v ended=%v", i, excluded, ended[i]), excluded,
							func(k int) capacity.Mark { return leases[i][k].Mark })
					}
				}
				report("no mark", false, func(int) capacity.Mark { return capacity.Mark{} })
				report("no grant number", false, func(k int) capacity.Mark {
					m := leases[40][k].Mark
					m.Seq = 0
					return m
				})
			}
		})
	}
}

package redisstore

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// liveSumsScope is the scope of the live-sums tests.
var liveSumsScope = capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "m", Credential: "livesums"}

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

// requireLiveSums checks the live sums of sc in Redis against its leases
// (lua/state.lua, index.liveAdd): a field per live lease that holds some
// of a bucket, with its charges; and, where the sums hold a tree (always
// past 16 leases), each field of each level the sum of the leases it
// covers, and no other field.
func requireLiveSums(t *testing.T, s *Store, sc capacity.Scope) {
	t.Helper()
	ctx := context.Background()
	const script = `local out, all = {}, redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local v, parts = cmsgpack.unpack(all[i + 1]), {}
  for d = 1, #v do parts[d] = string.format('%.17g', v[d]) end
  out[#out + 1] = all[i] .. '=' .. table.concat(parts, ' ')
end
return out`
	lines, err := s.rdb.Eval(ctx, script, []string{s.keysFor(sc).keys[keyLiveSums]}).StringSlice()
	require.NoError(t, err)
	got := map[string][4]float64{}
	tree := false
	for _, line := range lines {
		name, values, _ := strings.Cut(line, "=")
		var v [4]float64
		for d, f := range strings.Fields(values) {
			v[d], err = strconv.ParseFloat(f, 64)
			require.NoError(t, err)
		}
		got[name] = v
		tree = tree || !strings.HasPrefix(name, "0:")
	}
	snap, err := s.Snapshot(ctx, sc)
	require.NoError(t, err)
	want := map[string][4]float64{}
	for _, le := range snap.Leases {
		var v [4]float64
		held := false
		for d := range v {
			v[d] = float64(le.Charges[d])
			held = held || v[d] != 0
		}
		if !held {
			continue
		}
		for l := range 5 {
			if l > 0 && !tree {
				break
			}
			name := fmt.Sprintf("%d:%d", l, le.Mark.Seq/int64(math.Pow(16, float64(l))))
			sum := want[name]
			for d := range v {
				sum[d] += v[d]
			}
			want[name] = sum
		}
	}
	if len(snap.Leases) > 16 {
		require.True(t, tree, "past 16 leases, the sums are a tree")
	}
	require.Equal(t, want, got, "the live sums, then what the leases hold")
}

// TestLiveSums: what a report counts of the leases in flight, which the
// Redis store reads from sums by grant number (lua/state.lua,
// index.liveBefore) and the memory store from its leases, is the same
// while the sums are flat and through every level of the tree: leases
// numbered across a boundary of each level, the lowest ones ended (so the
// top level's first field empties), reports of a remaining with calls in
// flight and without, and marks of live leases, ended ones, none, and one
// from before grant numbers.
func TestLiveSums(t *testing.T) {
	for _, tt := range []struct {
		first  int64 // the Redis store's grant count after the first grant
		leases int
	}{
		{1, 10}, // flat sums
		{1, 60},
		{16*16 - 20, 60},
		{16*16*16 - 30, 60},
		{16*16*16*16 - 30, 60},
	} {
		t.Run(fmt.Sprintf("second=%d,leases=%d", tt.first+1, tt.leases), func(t *testing.T) {
			start := time.Now().Truncate(time.Second)
			redisClock, memClock := capacitytest.NewManualClock(start), capacitytest.NewManualClock(start)
			rs, _ := newTestStore(t, Options{Engine: EngineScripts, Clock: redisClock})
			ms := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: memClock})
			ctx := context.Background()
			sc := liveSumsScope
			l := capacity.Limits{TokensPerMinute: 6_000_000, RequestsPerMinute: 600_000, SafetyMargin: 1}
			stores := []capacity.Store{rs, ms}
			var leases [][2]capacity.Lease
			grant := func(i int) {
				t.Helper()
				// Each past the reorder window of the one before: its mark's
				// InFlight, which bounds what a report counts as granted
				// before it from below, holds none of them.
				redisClock.Advance(tuning.ReorderWindow + time.Millisecond)
				memClock.Advance(tuning.ReorderWindow + time.Millisecond)
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
			n := tt.leases
			grant(0)
			setGrants(t, rs, sc, tt.first)
			for i := 1; i < n; i++ {
				grant(i)
			}
			require.Equal(t, tt.first+int64(n-1), leases[n-1][0].Mark.Seq, "the Redis store numbers on from the count set")
			reported := []int{n/5 + 1, n/5 + 2, n / 4, n / 3, n/2 - 1, n / 2, n/2 + 1, 3 * n / 4, n - 2, n - 1, 3, 0}
			if tt.first > 16*16*16 {
				// Then leases two top fields further: a report of one of
				// them reads each top field below its own.
				setGrants(t, rs, sc, tt.first+2*16*16*16*16)
				for i := n; i < n+10; i++ {
					grant(i)
				}
				reported = append(reported, n, n+5, n+9)
			}
			requireLiveSums(t, rs, sc)
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
			// End the lowest ones and every third, then the first half:
			// with 60 leases from 65,507, every one below the top level's
			// boundary.
			for _, ends := range []func(i int) bool{
				func(i int) bool { return i < n/5 || i%3 == 0 },
				func(i int) bool { return i < n/2 },
			} {
				for i := range leases {
					if ends(i) {
						end(i)
					}
				}
				requireLiveSums(t, rs, sc)
				for _, i := range reported {
					for _, excluded := range []bool{false, true} {
						report(fmt.Sprintf("c%d excluded=%v ended=%v", i, excluded, ended[i]), excluded,
							func(k int) capacity.Mark { return leases[i][k].Mark })
					}
				}
				report("no mark", false, func(int) capacity.Mark { return capacity.Mark{} })
				report("no grant number", false, func(k int) capacity.Mark {
					m := leases[n-3][k].Mark
					m.Seq = 0
					return m
				})
			}
		})
	}
}

// TestLiveSumsInBatches: the live sums follow leases granted and ended
// many to a script call, as a busy scope's calls come: the sums become a
// tree within a batch (with grants of the same batch still unwritten),
// stay one while leases live, are deleted when the last ends, and are
// flat again after.
func TestLiveSumsInBatches(t *testing.T) {
	s, _ := newTestStore(t, Options{Engine: EngineScripts})
	ctx := context.Background()
	l := capacity.Limits{TokensPerMinute: 6_000_000, RequestsPerMinute: 600_000, SafetyMargin: 1}
	at := func(calls []string, do func(call string) error) {
		t.Helper()
		var g errgroup.Group
		for _, c := range calls {
			g.Go(func() error { return do(c) })
		}
		require.NoError(t, g.Wait())
	}
	leases := map[string]capacity.Lease{}
	grants := make(chan capacity.Lease, 100)
	reserve := func(call string) error {
		res, err := s.Reserve(ctx, capacity.Request{Scope: liveSumsScope, Limits: l, Call: call, Attempt: 1, TTL: time.Hour,
			Charges: capacity.Charges{capacity.Requests: 1, capacity.Tokens: int64(100 * len(call)), capacity.InFlight: 1}})
		if err == nil && !res.Granted {
			err = fmt.Errorf("%s not granted: %+v", call, res)
		}
		grants <- res.Lease
		return err
	}
	settle := func(call string) error { return s.Settle(ctx, leases[call], leases[call].Charges) }
	calls := func(prefix string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprint(prefix, i))
		}
		return out
	}
	collect := func(n int) {
		for range n {
			le := <-grants
			leases[le.Call] = le
		}
	}
	first, second := calls("a", 10), calls("bb", 30)
	at(first, reserve)
	collect(len(first))
	requireLiveSums(t, s, liveSumsScope)
	at(second, reserve)
	collect(len(second))
	requireLiveSums(t, s, liveSumsScope)
	at(append(first, second[:27]...), settle)
	requireLiveSums(t, s, liveSumsScope)
	at(second[27:], settle)
	requireLiveSums(t, s, liveSumsScope)
	third := calls("ccc", 5)
	at(third, reserve)
	collect(len(third))
	requireLiveSums(t, s, liveSumsScope)
}

// TestLiveSumsAcrossVersions: leases that scripts 6.1 granted, or wrote
// again (a renewal rewrites the record without its grant number), take the
// next grant numbers when this version re-indexes the scope, and the live
// sums are what the leases hold, after each change of hands.
func TestLiveSumsAcrossVersions(t *testing.T) {
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	previous, err := loadScripts(os.DirFS("testdata/scripts-v6.1"), ".")
	require.NoError(t, err)
	older, err := New(rdb, Options{Engine: EngineScripts, Prefix: prefix})
	require.NoError(t, err)
	older.scripts = previous
	newer, err := New(rdb, Options{Engine: EngineScripts, Prefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { _ = older.Close(); _ = newer.Close() })
	ctx := context.Background()
	l := capacity.Limits{TokensPerMinute: 6_000_000, RequestsPerMinute: 600_000, SafetyMargin: 1}
	leases := map[string]capacity.Lease{}
	grant := func(s *Store, call string) {
		t.Helper()
		res, err := s.Reserve(ctx, capacity.Request{Scope: liveSumsScope, Limits: l, Call: call, Attempt: 1, TTL: time.Hour,
			Charges: capacity.Charges{capacity.Requests: 1, capacity.Tokens: int64(100 * len(leases)), capacity.InFlight: 1}})
		require.NoError(t, err)
		require.True(t, res.Granted, "%s: %+v", call, res)
		leases[call] = res.Lease
	}
	numbers := func() {
		t.Helper()
		snap, err := newer.Snapshot(ctx, liveSumsScope)
		require.NoError(t, err)
		seen := map[int64]string{}
		for _, le := range snap.Leases {
			require.Positive(t, le.Mark.Seq, "%s has a grant number", le.Call)
			require.NotContains(t, seen, le.Mark.Seq, "%s and %s", le.Call, seen[le.Mark.Seq])
			seen[le.Mark.Seq] = le.Call
		}
	}
	for i := range 5 {
		grant(newer, fmt.Sprint("new-", i))
	}
	for i := range 20 {
		grant(older, fmt.Sprint("old-", i))
	}
	_, err = older.Renew(ctx, leases["new-2"], 2*time.Hour)
	require.NoError(t, err)
	// A count behind the leases' numbers (set here; no version lowers it):
	// the re-index numbers on from the highest a lease holds.
	setGrants(t, newer, liveSumsScope, 0)
	grant(newer, "new-5") // re-indexes: 21 leases without a number
	requireLiveSums(t, newer, liveSumsScope)
	numbers()
	for i := range 18 {
		require.NoError(t, older.Settle(ctx, leases[fmt.Sprint("old-", i)], leases[fmt.Sprint("old-", i)].Charges))
	}
	grant(newer, "new-6") // re-indexes again, with 9 leases live: flat sums
	requireLiveSums(t, newer, liveSumsScope)
	numbers()
}

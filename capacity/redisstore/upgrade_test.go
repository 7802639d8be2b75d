package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// previousScripts are earlier versions' scripts, kept as they were
// released, by version. When the scripts change, copy lua/ to a directory of
// its own (after the release) so the next version is tested against this
// one. v3Ops says the version reads operations in the layout of 3.x
// (Store.v3Ops).
var previousScripts = []struct {
	version, dir string
	v3Ops        bool
}{
	{"3.3", "testdata/scripts-v3.3", true},
	{"4.7", "testdata/scripts-v4.7", false}, // before the indexes of 5.0 (decision 0007)
	{"5.0", "testdata/scripts-v5.0", false}, // remembers ended leases, not lapsed ones
	{"5.1", "testdata/scripts-v5.1", false}, // releases in a script of their own
	{"5.2", "testdata/scripts-v5.2", false}, // scripts only, no function library
	{"5.3", "testdata/scripts-v5.3", false}, // a refund retimes every ticket
	{"5.4", "testdata/scripts-v5.4", false}, // a debt, a report or a limit retimes every ticket
	{"5.5", "testdata/scripts-v5.5", false}, // the state as text fields, not packed
	{"6.0", "testdata/scripts-v6.0", false}, // a line per lease in the recent grants
	{"6.1", "testdata/scripts-v6.1", false}, // a report reads every live lease
	{"6.2", "testdata/scripts-v6.2", false}, // one script reclaims every expired lease and lapsed ticket
	{"6.3", "testdata/scripts-v6.3", false}, // gives a state to a scope that has records (the records engine)
}

// rollingLimits bind on combined tokens (60,000/s, 30,000 at once), with
// requests and in-flight slots limited too, and class floors.
var rollingLimits = capacity.Limits{
	RequestsPerMinute: 30_000,
	TokensPerMinute:   3_600_000,
	MaxInFlight:       12,
	Burst:             500 * time.Millisecond,
	SafetyMargin:      1,
	StandardFloor:     0.1,
	BulkFloor:         0.2,
}

// TestRollingUpgrade runs the previous version's scripts and this version's
// on one scope at once, as workers do during a rolling deploy (and a
// rollback): goroutines alternate between a store of each version, waiting
// with tickets, settling with actual usage or releasing. Each version reads
// the state, leases and tickets the other wrote, so the scope keeps one
// budget: the conformance invariant holds over every interval across both,
// in every bucket and the in-flight cap. (Version 4.0 adds fair queuing:
// fields of tickets, leases and the state that 3.3 leaves as they are, and
// longer operations, which the previous worker sends in its own layout:
// Store.v3Ops. Version 5.0 adds indexes that 4.7 does not keep up to date:
// 5.0 rebuilds them whenever it finds a state 4.7 saved last.)
func TestRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("3 s of traffic")
	}
	t.Parallel() // a prefix of its own per version
	for _, prev := range previousScripts {
		t.Run(prev.version, func(t *testing.T) { rollingUpgrade(t, prev.version, prev.dir, prev.v3Ops) })
	}
}

// rollingUpgrade is TestRollingUpgrade from the scripts of version in dir.
func rollingUpgrade(t *testing.T, version, dir string, v3Ops bool) {
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	previous, err := loadScripts(os.DirFS(dir), ".")
	require.NoError(t, err)
	older, err := New(rdb, Options{Engine: EngineScripts, Prefix: prefix})
	require.NoError(t, err)
	older.scripts, older.v3Ops = previous, v3Ops
	newer, err := New(rdb, Options{Engine: EngineScripts, Prefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { _ = older.Close(); _ = newer.Close() })

	const goroutines, duration = 24, 3 * time.Second
	var (
		mu     sync.Mutex
		leases []mpLease
		grants [2]int // by version: older, newer
	)
	// The older version's workers ran before the deploy: they saved the
	// scope's state first (a state this version creates is packed only, which
	// versions before 6.0 refuse: TestTextStateWindow).
	if le, ok := rollingCall(t, older, goroutines, 0, rand.New(rand.NewPCG(0, 7))); ok {
		leases = append(leases, le)
		grants[0]++
	}
	deadline := time.Now().Add(duration)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := 0; time.Now().Before(deadline); i++ {
				v := (g + i) % 2
				s := []*Store{older, newer}[v]
				le, ok := rollingCall(t, s, g, i, rng)
				if !ok {
					continue
				}
				mu.Lock()
				leases = append(leases, le)
				grants[v]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	t.Logf("%d calls granted: %d by the previous version's scripts, %d by this version's", len(leases), grants[0], grants[1])
	require.Positive(t, grants[0])
	require.Positive(t, grants[1])
	budgets := rollingLimits.Budgets()
	events := mpEvents(leases)
	for d := capacity.Requests; d <= capacity.Tokens; d++ {
		if !budgets[d].Limited {
			continue
		}
		worst, a, b := worstExcess(events, d, budgets[d])
		t.Logf("conformance %-8s worst interval %v: %.0f granted, bound %.0f (%.1f%%)", d, b.Sub(a).Round(time.Millisecond), worst.sum, worst.bound, 100*worst.sum/worst.bound)
		require.LessOrEqual(t, worst.sum, worst.bound+1e-6, "%s over its bound: two budgets?", d)
		if d == capacity.Tokens {
			// The traffic pressed on the budget (two budgets would have
			// shown), at least in the first burst.
			require.Greater(t, worst.sum/worst.bound, 0.5, "the calls never pressed on the token budget")
		}
	}
	require.LessOrEqual(t, mpMaxInFlight(leases), int(rollingLimits.MaxInFlight))
	from, to := events[0].at.Add(time.Second), events[len(events)-1].at.Add(-200*time.Millisecond)
	use := mpNet(events, capacity.Tokens, from, to) / (budgets[capacity.Tokens].Rate * to.Sub(from).Seconds())
	t.Logf("utilization of tokens: %.1f%% (not asserted: it depends on the machine's load)", 100*use)

	// The older version kept the fields only the newer one knows.
	state := newer.keysFor(keysScope).keys[keyState]
	writer, err := rdb.HGet(context.Background(), state, "written_by").Result()
	require.NoError(t, err)
	require.Contains(t, []string{scriptVersion, version}, writer)
	if !strings.HasPrefix(version, "6.") { // 6.0 on pack every field into one (stored.pack)
		kept, err := rdb.HExists(context.Background(), state, "virtual").Result()
		require.NoError(t, err)
		require.True(t, kept, "the fair-queuing state of 4.0 survives the older scripts")
	}

	// Both versions read what the other wrote.
	for _, s := range []*Store{older, newer} {
		snap, err := s.Snapshot(context.Background(), keysScope)
		require.NoError(t, err)
		require.Equal(t, rollingLimits, snap.Limits)
	}
}

// rollingCall makes one call on s: wait for a grant (booking a ticket),
// hold it, then settle with actual usage (under or over the reservation)
// or, one call in ten, release it. It reports the call in Redis time.
func rollingCall(t *testing.T, s *Store, g, i int, rng *rand.Rand) (mpLease, bool) {
	ctx := context.Background()
	var c capacity.Charges
	c[capacity.Requests], c[capacity.InFlight] = 1, 1
	c[capacity.Tokens] = 100 + rng.Int64N(900)
	req := capacity.Request{
		Scope: keysScope, Limits: rollingLimits, Call: fmt.Sprintf("c%d-%d", g, i), Attempt: 1,
		Charges: c, Book: true, Class: capacity.Class(rng.IntN(3)), TTL: 10 * time.Second,
	}
	res, err := capacity.Wait(ctx, s, req, capacity.WaitOptions{MaxWait: 2 * time.Second})
	require.NoError(t, err)
	if !res.Granted {
		_ = s.Release(ctx, capacity.Lease{Scope: keysScope, Call: req.Call})
		return mpLease{}, false
	}
	time.Sleep(time.Duration(1+rng.IntN(15)) * time.Millisecond)
	le := mpLease{granted: res.Lease.GrantedAt, reserved: c, final: c}
	if rng.IntN(10) == 0 {
		le.final = capacity.Charges{capacity.InFlight: 1}
		le.settled = releaseAt(t, s, res.Lease)
		return le, true
	}
	le.final[capacity.Tokens] = c[capacity.Tokens]/2 + rng.Int64N(c[capacity.Tokens])
	at, err := s.settle(ctx, res.Lease, le.final)
	require.NoError(t, err)
	le.settled = at
	return le, true
}

// releaseAt releases le as Store.Release does and returns the release's
// Redis time.
func releaseAt(t *testing.T, s *Store, le capacity.Lease) time.Time {
	at, err := s.release(context.Background(), le)
	require.NoError(t, err)
	return at
}

// TestUpgradeRebuildsIndexes: tickets booked by scripts 4.7, which keep no
// order sets, follow the budget once 5.0 moves it: 5.0 rebuilds its
// indexes from the tickets when it finds a state 4.7 saved last.
func TestUpgradeRebuildsIndexes(t *testing.T) {
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	previous, err := loadScripts(os.DirFS("testdata/scripts-v4.7"), ".")
	require.NoError(t, err)
	older, err := New(rdb, Options{Engine: EngineScripts, Prefix: prefix})
	require.NoError(t, err)
	older.scripts = previous
	newer, err := New(rdb, Options{Engine: EngineScripts, Prefix: prefix})
	require.NoError(t, err)
	t.Cleanup(func() { _ = older.Close(); _ = newer.Close() })
	ctx := context.Background()
	// One at once, one per 10 s: the tickets are 10 s apart.
	const spacing = 10 * time.Second
	l := capacity.Limits{RequestsPerMinute: 6, SafetyMargin: 1, Burst: spacing}
	one := capacity.Charges{capacity.Requests: 1}
	for i := range 4 {
		res, err := older.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: fmt.Sprint("c", i), Attempt: 1, Charges: one, Book: true})
		require.NoError(t, err)
		require.Equal(t, i == 0, res.Granted, "call %d", i)
	}
	before, err := newer.Snapshot(ctx, keysScope)
	require.NoError(t, err)
	require.Len(t, before.Tickets, 3)

	// The first ticket's call gives up before its time (on Redis time,
	// read after the release): its 10 s come back, and the tickets behind
	// it are due 10 s earlier. The figures are ticket times the store
	// recorded, in Redis time; no stall of this process short of 10 s
	// moves them (at one a second, a 1.5 s stall made the move 0.5 s).
	require.NoError(t, newer.Release(ctx, capacity.Lease{Scope: keysScope, Call: "c1"}))
	after, err := newer.Snapshot(ctx, keysScope)
	require.NoError(t, err)
	require.True(t, after.Now.Before(before.Tickets[0].At), "c1 was released after its ticket was due (%v)", after.Now.Sub(before.Tickets[0].At))
	at := map[string]time.Time{}
	for _, tk := range before.Tickets {
		at[tk.Call] = tk.At
	}
	require.Len(t, after.Tickets, 2)
	for _, tk := range after.Tickets {
		moved := at[tk.Call].Sub(tk.At)
		require.InDelta(t, spacing.Seconds(), moved.Seconds(), 0.1, "%s moved %v", tk.Call, moved)
	}
}

// TestUpgradeRebuildsOnlyWhatLacksIndexes: a state saved last by scripts
// that keep this version's indexes (this version alone, since 6.1 groups
// the recent grants) is decided on as it is; one saved by another version
// is re-indexed (index.keptBy in lua/state.lua). A rebuild begins by
// deleting the index keys, so the commands a reserve ran on a server of
// its own tell the two apart.
func TestUpgradeRebuildsOnlyWhatLacksIndexes(t *testing.T) {
	for _, tt := range []struct {
		version, dir string
		rebuild      bool
	}{
		{"4.7", "testdata/scripts-v4.7", true},
		// 5.0 to 6.0 kept a line per lease in the recent grants, which 6.1
		// groups by the time they were granted: rebuilt once.
		{"5.0", "testdata/scripts-v5.0", true},
		{"5.5", "testdata/scripts-v5.5", true},
		{"6.0", "testdata/scripts-v6.0", true},
		// 6.1 kept each live lease's mark by call, which 6.2 sums by grant
		// number: rebuilt once.
		{"6.1", "testdata/scripts-v6.1", true},
		// 6.2 and 6.3 keep the indexes as 6.4 does.
		{"6.2", "testdata/scripts-v6.2", false},
		{"6.3", "testdata/scripts-v6.3", false},
		{scriptVersion, "", false}, // the same version: nothing to rebuild
	} {
		t.Run(tt.version, func(t *testing.T) {
			srv := testenv.StartRedisServer(t, "")
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			t.Cleanup(func() { _ = rdb.Close() })
			older, err := New(rdb, Options{Engine: EngineScripts})
			require.NoError(t, err)
			if tt.dir != "" {
				previous, err := loadScripts(os.DirFS(tt.dir), ".")
				require.NoError(t, err)
				older.scripts = previous
			}
			newer, err := New(rdb, Options{Engine: EngineScripts})
			require.NoError(t, err)
			t.Cleanup(func() { _ = older.Close(); _ = newer.Close() })
			ctx := context.Background()
			l := capacity.Limits{RequestsPerMinute: 6, SafetyMargin: 1, Burst: 10 * time.Second}
			one := capacity.Charges{capacity.Requests: 1}
			for i := range 3 { // a lease and two tickets, saved by the older version
				_, err := older.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: fmt.Sprint("c", i), Attempt: 1, Charges: one, Book: true})
				require.NoError(t, err)
			}
			require.NoError(t, rdb.ConfigResetStat(ctx).Err())
			_, err = newer.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: "c3", Attempt: 1, Charges: one, Book: true})
			require.NoError(t, err)
			stats, err := rdb.Info(ctx, "commandstats").Result()
			require.NoError(t, err)
			require.Equal(t, tt.rebuild, strings.Contains(stats, "cmdstat_del:"), "a rebuild's DEL:\n%s", stats)
		})
	}
}

// TestTextStateWindow: a state that scripts before 6.0 saved is read from
// its text, and kept as text too, beside the packed state, for
// textStateWindow after such a version last saved it, in its scope and in
// every new scope of its credential: workers of 5.5 and of this version
// keep one budget. After the window this version drops the text and marks
// the state format 4, which 5.5 refuses with an error, never a grant; so
// is a new scope of a credential where no 5.5 worker saved lately.
func TestTextStateWindow(t *testing.T) {
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	clock := capacitytest.NewManualClock(time.Now())
	previous, err := loadScripts(os.DirFS("testdata/scripts-v5.5"), ".")
	require.NoError(t, err)
	older, err := New(rdb, Options{Engine: EngineScripts, Prefix: prefix, Clock: clock})
	require.NoError(t, err)
	older.scripts = previous
	newer, err := New(rdb, Options{Engine: EngineScripts, Prefix: prefix, Clock: clock})
	require.NoError(t, err)
	t.Cleanup(func() { _ = older.Close(); _ = newer.Close() })
	ctx := context.Background()
	l := capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1, Burst: 2 * time.Second} // 2 at once
	reserve := func(s *Store, sc capacity.Scope, call string) (capacity.Reservation, error) {
		return s.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: call, Attempt: 1, Charges: capacity.Charges{capacity.Requests: 1}})
	}
	granted := func(s *Store, sc capacity.Scope, call string) bool {
		res, err := reserve(s, sc, call)
		require.NoError(t, err)
		return res.Granted
	}
	stateOf := func(sc capacity.Scope) map[string]string {
		h, err := rdb.HGetAll(ctx, newer.keysFor(sc).keys[keyState]).Result()
		require.NoError(t, err)
		return h
	}

	// One budget of two requests across both versions.
	require.True(t, granted(older, keysScope, "a"))
	require.True(t, granted(newer, keysScope, "b"))
	st := stateOf(keysScope)
	require.Equal(t, "3", st["format"], "the text is kept while 5.5 may read it")
	require.Equal(t, scriptVersion, st["written_by"])
	require.NotEmpty(t, st["packed"])
	require.Equal(t, "2", strings.Fields(st["granted"])[0], "the text holds the newer version's grant")
	require.False(t, granted(older, keysScope, "c"), "the older version sees the newer one's grant")
	clock.Advance(2 * time.Second)
	require.True(t, granted(older, keysScope, "d"))
	require.True(t, granted(newer, keysScope, "e"))
	require.False(t, granted(newer, keysScope, "f"), "the newer version sees the older one's grant")

	// A new scope of the credential keeps a text state too, within the window.
	other := keysScope
	other.LimitGroup = "other"
	clock.Advance(time.Hour)
	require.True(t, granted(newer, other, "g"))
	require.Equal(t, "3", stateOf(other)["format"])
	require.True(t, granted(older, other, "h"))
	require.False(t, granted(newer, other, "i"), "one budget in the new scope too")

	// After the window the text is dropped, and 5.5 refuses the state.
	clock.Advance(textStateWindow)
	require.True(t, granted(newer, keysScope, "j"))
	st = stateOf(keysScope)
	require.Equal(t, "4", st["format"])
	require.Len(t, st, 3, "packed, written_by and format: the text is gone")
	res, err := reserve(older, keysScope, "k")
	require.ErrorContains(t, err, "unknown scope state format")
	require.False(t, res.Granted)
	require.True(t, granted(newer, keysScope, "l"), "the newer version goes on")

	// A new scope where no 5.5 worker saved within the window is packed
	// only, from the start.
	fresh := keysScope
	fresh.LimitGroup = "fresh"
	require.True(t, granted(newer, fresh, "m"))
	require.Equal(t, "4", stateOf(fresh)["format"])
	_, err = reserve(older, fresh, "n")
	require.ErrorContains(t, err, "unknown scope state format")

	// KeepTextState brings the text back for every scope of every
	// credential, at its next save: 5.5 shares the budget again (a rollback).
	solo := keysScope
	solo.Credential = "team/b"
	require.True(t, granted(newer, solo, "o"))
	require.Equal(t, "4", stateOf(solo)["format"])
	_, err = newer.KeepTextState(ctx, 0)
	require.ErrorIs(t, err, ErrInvalidTextStateFor)
	n, err := newer.KeepTextState(ctx, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 2, n, "two credentials")
	clock.Advance(2 * time.Second)
	for _, sc := range []capacity.Scope{keysScope, fresh, solo} {
		require.True(t, granted(newer, sc, "p-"+sc.Key()))
		require.Equal(t, "3", stateOf(sc)["format"], sc.Key())
	}
	require.True(t, granted(older, keysScope, "q"))
	require.False(t, granted(older, keysScope, "r"), "one budget")
	_, err = reserve(newer, keysScope, "s") // finds 5.5's save: the credential is marked a day
	require.NoError(t, err)

	// When the mark runs out, a credential where 6.0 found a 5.5 save since
	// keeps its text a day from then; the other drops it.
	clock.Advance(time.Hour + 2*time.Second)
	for _, sc := range []capacity.Scope{fresh, solo} {
		require.True(t, granted(newer, sc, "t-"+sc.Key()))
	}
	require.Equal(t, "3", stateOf(fresh)["format"], "a 5.5 save of this credential was found within the day")
	require.Equal(t, "4", stateOf(solo)["format"], "the mark ran out")
}

// TestUpgradeFromScripts63InOneStep: the upgrade from scripts 6.3 or
// earlier to this version's default engine in one step, every 6.3 worker
// stopped before the first of this version starts (doc.go, The records
// engine): a scope 6.3 left a state to, its slot still held by a call 6.3
// granted, stays on this version's scripts, and the slot is held once.
func TestUpgradeFromScripts63InOneStep(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	ctx := context.Background()
	previous, err := loadScripts(os.DirFS("testdata/scripts-v6.3"), ".")
	require.NoError(t, err)
	older, err := New(rdb, Options{Engine: EngineScripts, Prefix: prefix})
	require.NoError(t, err)
	older.scripts = previous
	req := func(call string) capacity.Request { return slotRequest(keysScope, 1, call) }
	held, err := older.Reserve(ctx, req("a"))
	require.NoError(t, err)
	require.True(t, held.Granted)
	require.NoError(t, older.Close()) // the 6.3 workers stop; their call is still in flight

	newer, err := New(rdb, Options{Prefix: prefix}) // the default engine
	require.NoError(t, err)
	defer newer.Close()
	require.Equal(t, EngineRecords, newer.opts.Engine)
	res, err := newer.Reserve(ctx, req("b"))
	require.NoError(t, err)
	require.False(t, res.Granted, "the slot 6.3 granted is held")
	engine, ok, err := newer.EngineOf(ctx, keysScope)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, EngineScripts, engine, "a scope 6.3 holds stays on the scripts")
	require.NoError(t, newer.Settle(ctx, held.Lease, held.Lease.Charges), "6.3's call settles on this version")
	res, err = newer.Reserve(ctx, req("b"))
	require.NoError(t, err)
	require.True(t, res.Granted)
	require.Zero(t, newer.Stats().Writes, "no records beside the scripts' state")
}

package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/learn"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// clusterMasters is the size of the Redis Clusters the tests start.
const clusterMasters = 3

// TestCluster runs the contract suite, class and fairness cases included,
// through a *redis.ClusterClient on a 3-master Redis Cluster: every script's
// keys must hash to one slot (Redis refuses CROSSSLOT) and release messages
// travel by sharded pub/sub. Each case has its own prefix, so the
// credentials' hash tags spread over the masters; the test requires that
// every master held some.
func TestCluster(t *testing.T) {
	t.Parallel()
	cl := testenv.StartRedisCluster(t, clusterMasters)
	rdb := cl.Client(t)
	var stores []*Store
	var mu sync.Mutex
	factory := func(t *testing.T, clock capacity.Clock) capacity.Store {
		s, err := New(rdb, Options{Engine: EngineScripts, Prefix: "cluster-" + t.Name(), Clock: clock})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		mu.Lock()
		stores = append(stores, s)
		mu.Unlock()
		return s
	}
	storetest.Run(t, factory)
	storetest.RunCases(t, storetest.ClassCases, factory)
	storetest.RunCases(t, storetest.FairCases, factory)
	for _, s := range stores {
		require.False(t, s.functions.off.Load(), "a store fell back to EVALSHA: the library was not loaded on every master")
	}

	tags := tagsByMaster(t, rdb, "{cluster-")
	total := 0
	for addr, ts := range tags {
		total += len(ts)
		t.Logf("master %s: %d credentials' hash tags in %d slots", addr, len(ts), len(distinctSlots(t, rdb, ts)))
	}
	require.Len(t, tags, clusterMasters, "every master holds some of the suite's credentials")
	t.Logf("%d hash tags over %d masters", total, len(tags))
}

// TestClusterSpread: on a 3-master cluster, scopes whose credentials live
// on different masters each keep their own budget, failure counts, learned
// histograms and release notifications (SSUBSCRIBE reaches the shard that
// owns each credential's slot), and the listings (Scopes, LearnedScopes)
// scan every master.
func TestClusterSpread(t *testing.T) {
	t.Parallel()
	cl := testenv.StartRedisCluster(t, clusterMasters)
	rdb := cl.Client(t)
	prefix := "spread"
	scopes := spreadScopes(t, rdb, prefix, clusterMasters)
	ctx := context.Background()
	a, err := New(rdb, Options{Engine: EngineScripts, Prefix: prefix})
	require.NoError(t, err)
	defer a.Close()
	b, err := New(cl.Client(t), Options{Engine: EngineScripts, Prefix: prefix}) // another worker, its own connections
	require.NoError(t, err)
	defer b.Close()
	limits := capacity.Limits{RequestsPerMinute: 600, MaxInFlight: 1}

	t.Run("Budgets", func(t *testing.T) {
		for i, sc := range scopes {
			res, err := a.Reserve(ctx, capacity.Request{Scope: sc, Limits: limits, Call: "held", Attempt: 1, Charges: oneCharge(), TTL: time.Minute})
			require.NoError(t, err)
			require.True(t, res.Granted, "scope %d", i)
			res, err = b.Reserve(ctx, capacity.Request{Scope: sc, Limits: limits, Call: "second", Attempt: 1, Charges: oneCharge()})
			require.NoError(t, err)
			require.False(t, res.Granted, "scope %d: its one slot is held by the other worker", i)
			require.NoError(t, a.Release(ctx, capacity.Lease{Scope: sc, Call: "held", Attempt: 1, ID: capacity.LeaseID("held", 1)}))
		}
		got, err := b.Scopes(ctx)
		require.NoError(t, err)
		require.ElementsMatch(t, scopes, got, "Scopes lists the scopes of every master")
	})

	t.Run("Failures", func(t *testing.T) {
		for i, sc := range scopes {
			for want := 1; want <= i+1; want++ {
				n, err := []*Store{a, b}[want%2].AddFailure(ctx, sc, "call", time.Minute)
				require.NoError(t, err)
				require.Equal(t, want, n, "scope %d: one count shared by both workers", i)
			}
		}
	})

	t.Run("Learner", func(t *testing.T) {
		for i, sc := range scopes {
			for range i + 1 {
				require.NoError(t, a.Learn(ctx, sc, "Chat", learn.Sample{OutputTokens: 100, MaxTokens: 1000, InputTokens: 500}))
			}
		}
		for i, sc := range scopes {
			got, err := b.Learned(ctx, sc, "Chat")
			require.NoError(t, err)
			require.InDelta(t, float64(i+1), got.Calls(), 1e-9, "scope %d", i)
		}
		got, err := b.LearnedScopes(ctx)
		require.NoError(t, err)
		require.ElementsMatch(t, scopes, got, "LearnedScopes lists the scopes of every master")
	})

	t.Run("Released", func(t *testing.T) {
		for i, sc := range scopes {
			held, err := a.Reserve(ctx, capacity.Request{Scope: sc, Limits: limits, Call: "r", Attempt: 1, Charges: oneCharge(), TTL: time.Minute})
			require.NoError(t, err)
			require.True(t, held.Granted)
			ch, stop := subscribed(t, b, sc, rdb)
			require.NoError(t, a.Settle(ctx, held.Lease, held.Lease.Charges))
			select {
			case <-ch:
			case <-time.After(5 * time.Second):
				t.Fatalf("scope %d: the other worker's waiter was not woken", i)
			}
			stop()
		}
	})

	t.Run("TicketDue", func(t *testing.T) {
		l := capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1, Burst: time.Second} // one request a second, one at once
		for i, sc := range scopes {
			sc.LimitGroup = "tickets"
			first, err := a.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: "first", Attempt: 1, Charges: oneCharge(), TTL: time.Minute, Book: true})
			require.NoError(t, err)
			require.True(t, first.Granted)
			second, err := a.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: "second", Attempt: 1, Charges: oneCharge(), TTL: time.Minute, Book: true})
			require.NoError(t, err)
			require.False(t, second.Granted)
			// b waits for its ticket: subscribed on the credential's shard.
			due, stop := b.TicketDue(sc, "second")
			awaitSubscribed(t, rdb, b, sc)
			require.NoError(t, a.Release(ctx, first.Lease)) // the booked second is brought forward
			select {
			case <-due:
			case <-time.After(5 * time.Second):
				t.Fatalf("scope %d: the ticket's holder was not told", i)
			}
			stop()
		}
	})
	require.Zero(t, a.Stats().Resets+b.Stats().Resets)
}

// TestClusterMoved moves the slot of a scope's credential to another master
// (CLUSTER SETSLOT, MIGRATE: what redis-cli --cluster reshard does) while the
// scope holds a lease and another worker is subscribed to its releases. The
// store follows the MOVED redirection and finds the scope as it was (the
// lease, the in-flight count, the same epoch: no reset), and the other
// worker's sharded subscription, dropped by the old master, is made again on
// the new one. It runs on both engines.
func TestClusterMoved(t *testing.T) {
	t.Parallel()
	for _, engine := range []Engine{EngineScripts, EngineRecords} {
		t.Run(engine.String(), func(t *testing.T) {
			t.Parallel()
			testClusterMoved(t, engine)
		})
	}
}

func testClusterMoved(t *testing.T, engine Engine) {
	cl := testenv.StartRedisCluster(t, clusterMasters)
	rdb := cl.Client(t)
	ctx := context.Background()
	prefix := "moved"
	sc := spreadScopes(t, rdb, prefix, 1)[0]
	a, err := New(rdb, Options{Prefix: prefix, Engine: engine})
	require.NoError(t, err)
	defer a.Close()
	b, err := New(cl.Client(t), Options{Prefix: prefix, Engine: engine})
	require.NoError(t, err)
	defer b.Close()
	limits := capacity.Limits{RequestsPerMinute: 600, MaxInFlight: 2}
	reserve := func(call string) capacity.Reservation {
		res, err := a.Reserve(ctx, capacity.Request{Scope: sc, Limits: limits, Call: call, Attempt: 1, Charges: oneCharge(), TTL: time.Minute})
		require.NoError(t, err)
		return res
	}
	held := reserve("held")
	require.True(t, held.Granted)
	_, stop := subscribed(t, b, sc, rdb)
	stop()

	slot := slotOf(t, rdb, prefix, sc)
	from := ownerOf(t, rdb, slot)
	to := cl.Addrs()[0]
	if to == from {
		to = cl.Addrs()[1]
	}
	moved := moveSlot(t, cl, slot, from, to, 0)
	t.Logf("slot %d of %s moved from %s to %s with its %d keys", slot, sc.CredentialKey(), from, to, moved)

	second := reserve("second")
	require.True(t, second.Granted, "one of two slots was free before the move")
	require.False(t, reserve("third").Granted, "the lease held before the move still counts")
	require.Equal(t, to, ownerOf(t, rdb, slot), "the slot is on its new master")

	ch, stop := subscribed(t, b, sc, rdb)
	defer stop()
	require.NoError(t, a.Settle(ctx, held.Lease, held.Lease.Charges), "a lease granted before the move settles after it")
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("the other worker's waiter was not woken after the move")
	}
	require.True(t, reserve("third").Granted)
	require.Zero(t, a.Stats().Resets+b.Stats().Resets, "a move is not a loss of state")
}

// TestClusterMovedUnderLoad moves a scope's slot while workers reserve and
// settle on it and on a scope of another master, holding the slot open
// (IMPORTING/MIGRATING) for 300 ms, as a reshard of a slot with many keys
// would. Operations on the moving slot fail with capacity.ErrStoreUnavailable
// (TRYAGAIN: its keys are split) until it lands, never with another error;
// the other master's scope is not disturbed (the store keeps using Redis);
// the in-flight cap holds throughout and no state is lost. It runs on both
// engines.
func TestClusterMovedUnderLoad(t *testing.T) {
	t.Parallel()
	for _, engine := range []Engine{EngineScripts, EngineRecords} {
		t.Run(engine.String(), func(t *testing.T) {
			t.Parallel()
			testClusterMovedUnderLoad(t, engine)
		})
	}
}

func testClusterMovedUnderLoad(t *testing.T, engine Engine) {
	cl := testenv.StartRedisCluster(t, clusterMasters)
	rdb := cl.Client(t)
	prefix := "moving"
	scopes := spreadScopes(t, rdb, prefix, 2)
	s, err := New(rdb, Options{Prefix: prefix, Engine: engine})
	require.NoError(t, err)
	defer s.Close()
	limits := capacity.Limits{RequestsPerMinute: 600_000, MaxInFlight: 4}
	type tally struct {
		grants, unavailable, held, maxHeld atomic.Int64
		mu                                 sync.Mutex
		other                              []error
	}
	var tallies [2]tally
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, sc := range scopes {
		tl := &tallies[i]
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ctx.Err() == nil; n++ {
					res, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: limits, Call: fmt.Sprintf("g%d-%d", g, n), Attempt: 1, Charges: oneCharge(), TTL: time.Minute})
					switch {
					case ctx.Err() != nil:
						return
					case errors.Is(err, capacity.ErrStoreUnavailable):
						tl.unavailable.Add(1)
						time.Sleep(5 * time.Millisecond)
					case err != nil:
						tl.mu.Lock()
						tl.other = append(tl.other, err)
						tl.mu.Unlock()
						time.Sleep(5 * time.Millisecond)
					case res.Granted:
						tl.grants.Add(1)
						// Counted after the grant and before the settle: never
						// more than the store holds.
						h := tl.held.Add(1)
						for m := tl.maxHeld.Load(); h > m && !tl.maxHeld.CompareAndSwap(m, h); m = tl.maxHeld.Load() {
						}
						time.Sleep(time.Millisecond)
						tl.held.Add(-1)
						err := s.Settle(context.Background(), res.Lease, res.Lease.Charges)
						for errors.Is(err, capacity.ErrStoreUnavailable) {
							time.Sleep(5 * time.Millisecond)
							err = s.Settle(context.Background(), res.Lease, res.Lease.Charges)
						}
						if err != nil {
							tl.mu.Lock()
							tl.other = append(tl.other, err)
							tl.mu.Unlock()
						}
					default:
						time.Sleep(time.Millisecond)
					}
				}
			}()
		}
	}
	time.Sleep(500 * time.Millisecond)
	slot := slotOf(t, rdb, prefix, scopes[0])
	from, to := ownerOf(t, rdb, slot), ownerOf(t, rdb, slotOf(t, rdb, prefix, scopes[1]))
	before := tallies[0].grants.Load()
	moved := moveSlot(t, cl, slot, from, to, 300*time.Millisecond)
	during := tallies[0].grants.Load() - before
	after := tallies[0].grants.Load()
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()
	t.Logf("slot %d (%d keys) moved from %s to %s, open for 300 ms, under load:", slot, moved, from, to)
	for i, sc := range scopes {
		tl := &tallies[i]
		t.Logf("  %s: %d grants, %d unavailable, %d other errors, at most %d of %d in flight",
			sc.Key(), tl.grants.Load(), tl.unavailable.Load(), len(tl.other), tl.maxHeld.Load(), limits.MaxInFlight)
		require.Empty(t, tl.other)
		require.LessOrEqual(t, tl.maxHeld.Load(), limits.MaxInFlight)
	}
	t.Logf("  the moving scope: %d grants during the move, %d in the 500 ms after it", during, tallies[0].grants.Load()-after)
	require.Positive(t, tallies[0].unavailable.Load(), "the moving slot was unavailable while open")
	require.Zero(t, tallies[1].unavailable.Load(), "the other master's scope was not disturbed")
	require.Greater(t, tallies[0].grants.Load(), after, "the moved scope admits again")
	require.Zero(t, s.Stats().Resets, "a move is not a loss of state")
}

// redisError is a Redis error reply, as go-redis returns them.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

// TestClusterErrors: a Cluster slot being moved fails the one operation
// with capacity.ErrStoreUnavailable and leaves Redis in use; an unreachable
// Redis is skipped for ProbeInterval; MOVED to a client that is not a
// Cluster client is a misconfiguration, returned as it is.
func TestClusterErrors(t *testing.T) {
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cluster.Close()
	single := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer single.Close()
	for _, tc := range []struct {
		name        string
		rdb         redis.UniversalClient
		err         error
		unavailable bool
		skipsRedis  bool
	}{
		{"TRYAGAIN", cluster, redisError("TRYAGAIN Multiple keys request during rehashing of slot"), true, false},
		{"MOVED", cluster, redisError("MOVED 15269 127.0.0.1:7001"), true, false},
		{"ASK", cluster, redisError("ASK 15269 127.0.0.1:7001"), true, false},
		{"CLUSTERDOWN", cluster, redisError("CLUSTERDOWN The cluster is down"), true, true},
		{"refused", cluster, &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true, true},
		{"MOVED to a single client", single, redisError("MOVED 15269 127.0.0.1:7001"), false, false},
		{"a script error", cluster, redisError("ERR user_script:1: oops"), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.rdb, Options{Engine: EngineScripts})
			require.NoError(t, err)
			got := s.failed(context.Background(), "reserve", tc.err)
			require.ErrorIs(t, got, tc.err)
			require.Equal(t, tc.unavailable, errors.Is(got, capacity.ErrStoreUnavailable), "%v", got)
			require.Equal(t, tc.skipsRedis, s.down("reserve") != nil)
		})
	}
}

// TestClusterMultiProcess is TestMultiProcess on a 3-master Redis Cluster:
// 4 worker processes, each on its own *redis.ClusterClient, share three
// scopes whose credentials live on three different masters, and every
// scope keeps the conformance invariant, the in-flight cap and the
// utilization target. It runs on both engines.
func TestClusterMultiProcess(t *testing.T) {
	if os.Getenv(envRole) == "worker" {
		mpWorker(t)
		return
	}
	t.Parallel()
	for _, engine := range []Engine{EngineScripts, EngineRecords} {
		t.Run(engine.String(), func(t *testing.T) {
			t.Parallel()
			testClusterMultiProcess(t, engine)
		})
	}
}

func testClusterMultiProcess(t *testing.T, engine Engine) {
	cl := testenv.StartRedisCluster(t, clusterMasters)
	rdb := cl.Client(t)
	prefix := "multiproc"
	var credentials []string
	owners := map[string]bool{}
	for _, sc := range spreadScopes(t, rdb, prefix, clusterMasters) {
		credentials = append(credentials, sc.Credential)
		owners[ownerOf(t, rdb, slotOf(t, rdb, prefix, sc))] = true
	}
	require.Len(t, owners, clusterMasters)
	t.Logf("credentials %v on masters %v", credentials, cl.Addrs())
	env := map[string]string{envCluster: strings.Join(cl.Addrs(), ","), envEngine: engine.String()}
	runMultiProcess(t, "^TestClusterMultiProcess$", rdb, prefix, credentials, env)
}

// subscribed returns a waiter of s on sc once s's subscription to sc's
// release channel is made on the master that owns it and confirmed (the
// confirmation wakes the head waiter once: releases may have been missed
// while it was made; that wake-up is taken here).
func subscribed(t *testing.T, s *Store, sc capacity.Scope, rdb *redis.ClusterClient) (<-chan struct{}, func()) {
	t.Helper()
	ch, stop := s.Released(sc)
	awaitSubscribed(t, rdb, s, sc)
	select {
	case <-ch: // the confirmation
		stop()
		return s.Released(sc)
	case <-time.After(2 * time.Second):
		return ch, stop
	}
}

// awaitSubscribed waits until the master that owns sc's slot counts a
// subscriber of its release channel.
func awaitSubscribed(t *testing.T, rdb *redis.ClusterClient, s *Store, sc capacity.Scope) {
	t.Helper()
	channel := s.keysFor(sc).channel
	owner := redis.NewClient(&redis.Options{Addr: ownerOf(t, rdb, slotOf(t, rdb, s.opts.Prefix, sc))})
	defer owner.Close()
	require.Eventually(t, func() bool {
		n, err := owner.PubSubShardNumSub(context.Background(), channel).Result()
		return err == nil && n[channel] > 0
	}, 10*time.Second, 20*time.Millisecond, "never subscribed to %s on %s", channel, owner.Options().Addr)
}

// spreadScopes returns n scopes under prefix whose credentials' slots are
// owned by n different masters.
func spreadScopes(t *testing.T, rdb *redis.ClusterClient, prefix string, n int) []capacity.Scope {
	t.Helper()
	var out []capacity.Scope
	seen := map[string]bool{}
	for i := 0; len(out) < n; i++ {
		require.Less(t, i, 1000, "no credential names found on %d masters", n)
		sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: fmt.Sprintf("team-%d", i)}
		owner := ownerOf(t, rdb, slotOf(t, rdb, prefix, sc))
		if !seen[owner] {
			seen[owner] = true
			out = append(out, sc)
		}
	}
	return out
}

// slotOf returns the cluster slot of sc's keys under prefix (CLUSTER KEYSLOT).
func slotOf(t *testing.T, rdb *redis.ClusterClient, prefix string, sc capacity.Scope) int64 {
	t.Helper()
	slot, err := rdb.ClusterKeySlot(context.Background(), newScopeKeys(prefix, sc).keys[keyState]).Result()
	require.NoError(t, err)
	return slot
}

// ownerOf returns the address of the master that owns slot (CLUSTER SHARDS).
func ownerOf(t *testing.T, rdb *redis.ClusterClient, slot int64) string {
	t.Helper()
	shards, err := rdb.ClusterShards(context.Background()).Result()
	require.NoError(t, err)
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start <= slot && slot <= r.End {
				for _, n := range sh.Nodes {
					if n.Role == "master" {
						return net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
					}
				}
			}
		}
	}
	t.Fatalf("slot %d has no owner", slot)
	return ""
}

// tagsByMaster returns, for each master, how many keys of each hash tag
// that begins with tagPrefix it holds.
func tagsByMaster(t *testing.T, rdb *redis.ClusterClient, tagPrefix string) map[string]map[string]int {
	t.Helper()
	var mu sync.Mutex
	out := map[string]map[string]int{}
	err := rdb.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
		tags := map[string]int{}
		iter := c.Scan(ctx, 0, tagPrefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			if tag, _, ok := strings.Cut(iter.Val(), "}"); ok {
				tags[tag+"}"]++
			}
		}
		if len(tags) > 0 {
			mu.Lock()
			out[c.Options().Addr] = tags
			mu.Unlock()
		}
		return iter.Err()
	})
	require.NoError(t, err)
	return out
}

// distinctSlots returns the slots of the hash tags, sorted.
func distinctSlots(t *testing.T, rdb *redis.ClusterClient, tags map[string]int) []int64 {
	t.Helper()
	set := map[int64]bool{}
	for tag := range tags {
		slot, err := rdb.ClusterKeySlot(context.Background(), tag).Result()
		require.NoError(t, err)
		set[slot] = true
	}
	out := make([]int64, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// moveSlot moves slot from the master at from to the master at to as
// redis-cli --cluster reshard does: to imports it, from migrates it, its
// keys MIGRATE in batches, and every master is told the new owner. It
// returns the number of keys moved.
func moveSlot(t *testing.T, cl *testenv.RedisCluster, slot int64, from, to string, hold time.Duration) int {
	t.Helper()
	ctx := context.Background()
	nodes := map[string]*redis.Client{}
	ids := map[string]string{}
	for _, addr := range cl.Addrs() {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		id, err := c.Do(ctx, "CLUSTER", "MYID").Text()
		require.NoError(t, err)
		nodes[addr], ids[addr] = c, id
	}
	src, dst := nodes[from], nodes[to]
	require.NoError(t, dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from]).Err())
	require.NoError(t, src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to]).Err())
	time.Sleep(hold)
	host, port, _ := strings.Cut(to, ":")
	moved := 0
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
		require.NoError(t, err)
		if len(keys) == 0 {
			break
		}
		args := append([]any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}, toAny(keys)...)
		require.NoError(t, src.Do(ctx, args...).Err())
		moved += len(keys)
	}
	for _, addr := range append([]string{to, from}, cl.Addrs()...) {
		require.NoError(t, nodes[addr].Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", ids[to]).Err())
	}
	return moved
}

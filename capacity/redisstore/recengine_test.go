package redisstore

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// slotRequest is a request for one of slots calls in flight on sc (6,000
// requests a minute, a minute's lease): the shape of the tests in which
// workers hold and hand over slots.
func slotRequest(sc capacity.Scope, slots int64, call string) capacity.Request {
	return capacity.Request{Scope: sc, Limits: capacity.Limits{RequestsPerMinute: 6000, MaxInFlight: slots}, Call: call, Attempt: 1,
		Charges: capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}, TTL: time.Minute}
}

// newRecordsStore returns a Store with EngineRecords on rdb and prefix,
// closed when the test ends.
func newRecordsStore(t testing.TB, rdb redis.UniversalClient, prefix string, clock capacity.Clock) *Store {
	t.Helper()
	s, err := New(rdb, Options{Prefix: prefix, Clock: clock, Engine: EngineRecords})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// runRecordsContract runs the contract suite, the class cases and the fair
// cases on rdb twice: on one store, and on two stores of one prefix (two
// workers) taking turns, the second's waiters woken by the first's writes.
// The rules are the memory store's; what it checks is that the copies keep
// one scope between them.
func runRecordsContract(t *testing.T, rdb redis.UniversalClient) {
	for _, tt := range []struct {
		name    string
		factory storetest.Factory
	}{
		{"one", func(t *testing.T, clock capacity.Clock) capacity.Store {
			return newRecordsStore(t, rdb, testPrefix(t, rdb), clock)
		}},
		{"two", func(t *testing.T, clock capacity.Clock) capacity.Store {
			prefix := testPrefix(t, rdb)
			return &recPair{a: newRecordsStore(t, rdb, prefix, clock), b: newRecordsStore(t, rdb, prefix, clock)}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, tt.factory)
			storetest.RunCases(t, storetest.ClassCases, tt.factory)
			storetest.RunCases(t, storetest.FairCases, tt.factory)
		})
	}
}

// TestRecordsContract runs the contract suite on the records engine.
func TestRecordsContract(t *testing.T) {
	t.Parallel()
	runRecordsContract(t, testClient(t))
}

// TestRecordsCluster runs the contract suite on the records engine on a
// Redis Cluster of three masters: a scope's keys, its credential's and its
// channel are in one slot.
func TestRecordsCluster(t *testing.T) {
	t.Parallel()
	runRecordsContract(t, testenv.StartRedisCluster(t, clusterMasters).Client(t))
}

// recordsACL is the least a Redis user of the records engine needs (the
// package doc lists it).
const recordsACL = "on >s3cret resetkeys ~{tgtest-* resetchannels &{tgtest-* -@all +evalsha +eval +ssubscribe +sunsubscribe " +
	"+ping +hello +hscan +exists +get +set +del +time +hget +hmget +hset +hdel +hlen +hgetall +rpush +lrange +ltrim +llen +pexpire +spublish"

// TestRecordsACL runs the contract suite, and a copy's read of a large
// scope in chunks, as a Redis user with no more than recordsACL: leaving
// out any one of its commands fails it.
func TestRecordsACL(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedisServer(t, "")
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = admin.Close() })
	ctx := context.Background()
	args := []any{"ACL", "SETUSER", "tollgate"}
	for _, f := range strings.Fields(recordsACL) {
		args = append(args, f)
	}
	require.NoError(t, admin.Do(ctx, args...).Err())
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "tollgate", Password: "s3cret"})
	t.Cleanup(func() { _ = rdb.Close() })
	runRecordsContract(t, rdb)
	t.Run("reload", func(t *testing.T) { testRecordsReload(t, rdb) })
}

// recPair is two workers' stores on one prefix, each operation sent to
// the one whose turn it is; calls wait on the second.
type recPair struct {
	a, b *Store
	turn atomic.Int64
}

var (
	_ capacity.Notifier       = (*recPair)(nil)
	_ capacity.TicketNotifier = (*recPair)(nil)
	_ capacity.Summarizer     = (*recPair)(nil)
)

func (r *recPair) next() *Store {
	if r.turn.Add(1)%2 == 0 {
		return r.a
	}
	return r.b
}

func (r *recPair) Reserve(ctx context.Context, req capacity.Request) (capacity.Reservation, error) {
	return r.next().Reserve(ctx, req)
}

func (r *recPair) Settle(ctx context.Context, le capacity.Lease, final capacity.Charges) error {
	return r.next().Settle(ctx, le, final)
}

func (r *recPair) Release(ctx context.Context, le capacity.Lease) error {
	return r.next().Release(ctx, le)
}

func (r *recPair) Renew(ctx context.Context, le capacity.Lease, ttl time.Duration) (capacity.Lease, error) {
	return r.next().Renew(ctx, le, ttl)
}

func (r *recPair) Observe(ctx context.Context, sc capacity.Scope, o capacity.Observation) error {
	return r.next().Observe(ctx, sc, o)
}

func (r *recPair) Block(ctx context.Context, sc capacity.Scope, b capacity.Block) error {
	return r.next().Block(ctx, sc, b)
}

func (r *recPair) Unblock(ctx context.Context, sc capacity.Scope, credential bool) error {
	return r.next().Unblock(ctx, sc, credential)
}

func (r *recPair) Snapshot(ctx context.Context, sc capacity.Scope) (capacity.Snapshot, error) {
	return r.next().Snapshot(ctx, sc)
}

func (r *recPair) Summary(ctx context.Context, sc capacity.Scope, call string) (capacity.Summary, error) {
	return r.next().Summary(ctx, sc, call)
}

func (r *recPair) AddFailure(ctx context.Context, sc capacity.Scope, call string, ttl time.Duration) (int, error) {
	return r.next().AddFailure(ctx, sc, call, ttl)
}

func (r *recPair) Released(sc capacity.Scope) (<-chan struct{}, func()) { return r.b.Released(sc) }

func (r *recPair) TicketDue(sc capacity.Scope, call string) (<-chan struct{}, func()) {
	return r.b.TicketDue(sc, call)
}

// TestRecordsReloadsInChunks has a second worker open a scope with more
// records than one script reads: it reads them in chunks and holds the
// same scope as the worker that wrote them.
func TestRecordsReloadsInChunks(t *testing.T) {
	t.Parallel()
	testRecordsReload(t, testClient(t))
}

func testRecordsReload(t *testing.T, rdb redis.UniversalClient) {
	prefix := testPrefix(t, rdb)
	ctx := context.Background()
	a, b := newRecordsStore(t, rdb, prefix, nil), newRecordsStore(t, rdb, prefix, nil)
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "reload"}
	lim := capacity.Limits{RequestsPerMinute: 60}
	for i := range 3 * recReadAtOnce {
		_, err := a.Reserve(ctx, capacity.Request{Scope: sc, Limits: lim, Call: fmt.Sprintf("c%d", i), Attempt: 1,
			Charges: capacity.Charges{capacity.Requests: 1}, Book: true, TTL: time.Hour})
		require.NoError(t, err)
	}
	n, err := rdb.HLen(ctx, a.rec.scope(sc).keys[0]).Result()
	require.NoError(t, err)
	require.Greater(t, n, int64(recReadAtOnce), "the scope holds more records than one script reads")

	snapB, err := b.Snapshot(ctx, sc)
	require.NoError(t, err)
	require.Equal(t, int64(1), b.Stats().Reloads)
	snapA, err := a.Snapshot(ctx, sc)
	require.NoError(t, err)
	require.Len(t, snapB.Tickets, len(snapA.Tickets))
	require.Greater(t, len(snapB.Tickets), 3*recReadAtOnce-10)
	recA, recB := a.rec.scope(sc).copy.ScopeRecords(sc), b.rec.scope(sc).copy.ScopeRecords(sc)
	require.Equal(t, recA.Fields, recB.Fields)
}

// TestRecordsWakeAnotherWorkersWaiters has a call wait in one worker for
// the slot a call in another worker holds: the other's settle wakes it.
func TestRecordsWakeAnotherWorkersWaiters(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	ctx := context.Background()
	a, b := newRecordsStore(t, rdb, prefix, nil), newRecordsStore(t, rdb, prefix, nil)
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "notice"}
	req := capacity.Request{Scope: sc, Limits: capacity.Limits{RequestsPerMinute: 6000, MaxInFlight: 1}, Call: "c1", Attempt: 1,
		Charges: capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}}
	held, err := a.Reserve(ctx, req)
	require.NoError(t, err)
	require.True(t, held.Granted)
	req.Call = "c2"
	res, err := b.Reserve(ctx, req)
	require.NoError(t, err)
	require.False(t, res.Granted, "granted beside a held slot")
	released, stop := b.Released(sc)
	defer stop()
	waitSubscribed(t, rdb, a.rec.scope(sc).keys[3])
	require.NoError(t, a.Settle(ctx, held.Lease, held.Lease.Charges))
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken by the other worker's settle")
	}
	res, err = b.Reserve(ctx, req)
	require.NoError(t, err)
	require.True(t, res.Granted)
}

// waitSubscribed waits until some client subscribes channel.
func waitSubscribed(t *testing.T, rdb redis.UniversalClient, channel string) {
	t.Helper()
	require.Eventually(t, func() bool {
		n, err := rdb.Do(context.Background(), "PUBSUB", "SHARDNUMSUB", channel).Slice()
		return err == nil && len(n) == 2 && n[1] != int64(0)
	}, 10*time.Second, 5*time.Millisecond)
}

// TestRecordsKeysLiveAsLongAsTheScopeMatters settles a short call: the
// scope's keys expire soon after its lease would have, not a day later.
func TestRecordsKeysLiveAsLongAsTheScopeMatters(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	ctx := context.Background()
	s := newRecordsStore(t, rdb, testPrefix(t, rdb), nil)
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "ttl"}
	res, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: capacity.Limits{RequestsPerMinute: 60_000}, Call: "c1", Attempt: 1,
		Charges: capacity.Charges{capacity.Requests: 1}, TTL: time.Second})
	require.NoError(t, err)
	require.True(t, res.Granted)
	require.NoError(t, s.Settle(ctx, res.Lease, res.Lease.Charges))
	for _, key := range s.rec.scope(sc).keys[:2] {
		ttl, err := rdb.PTTL(ctx, key).Result()
		require.NoError(t, err)
		require.Positive(t, ttl, key)
		require.LessOrEqual(t, ttl, time.Second+recSlack, "%s: the lease would have expired within a second", key)
	}
}

// TestRecordsReadsWriteNothing reads a scope (Snapshot, Summary) from a
// second worker: its version does not move.
func TestRecordsReadsWriteNothing(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	ctx := context.Background()
	a, b := newRecordsStore(t, rdb, prefix, nil), newRecordsStore(t, rdb, prefix, nil)
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "reads"}
	res, err := a.Reserve(ctx, capacity.Request{Scope: sc, Limits: capacity.Limits{RequestsPerMinute: 60}, Call: "c1", Attempt: 1,
		Charges: capacity.Charges{capacity.Requests: 1}, TTL: time.Minute})
	require.NoError(t, err)
	require.True(t, res.Granted)
	version := func() string { return rdb.HGet(ctx, a.rec.scope(sc).keys[0], "v").Val() }
	before := version()
	snap, err := b.Snapshot(ctx, sc)
	require.NoError(t, err)
	require.Len(t, snap.Leases, 1)
	sum, err := b.Summary(ctx, sc, "")
	require.NoError(t, err)
	require.Equal(t, 1, sum.InFlight)
	require.Equal(t, before, version(), "reads moved the version")
	scopes, err := b.Scopes(ctx)
	require.NoError(t, err)
	require.Equal(t, []capacity.Scope{sc}, scopes)
}

// TestRecordsFailClosed: with Redis unreachable every operation of the
// records engine returns an error wrapping capacity.ErrStoreUnavailable.
func TestRecordsFailClosed(t *testing.T) {
	t.Parallel()
	s, err := New(closedClient(t), Options{Engine: EngineRecords})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	l := capacity.Limits{RequestsPerMinute: 600}
	res, err := s.Reserve(ctx, unavailableReq("a", l))
	require.ErrorIs(t, err, capacity.ErrStoreUnavailable)
	require.False(t, res.Granted)
	// After the probe interval Redis is tried again, and the engine with
	// it: every operation fails the same way.
	s.downUntil.Store(0)
	le := capacity.Lease{Scope: unavailableScope, ID: "a#1", Call: "a", Attempt: 1}
	for name, op := range map[string]func() error{
		"settle":  func() error { return s.Settle(ctx, le, le.Charges) },
		"release": func() error { return s.Release(ctx, le) },
		"observe": func() error { return s.Observe(ctx, unavailableScope, capacity.Observation{}) },
		"block": func() error {
			return s.Block(ctx, unavailableScope, capacity.Block{Reason: capacity.Cooldown, Until: time.Now().Add(time.Second)})
		},
		"unblock":  func() error { return s.Unblock(ctx, unavailableScope, false) },
		"renew":    func() error { _, err := s.Renew(ctx, le, time.Minute); return err },
		"snapshot": func() error { _, err := s.Snapshot(ctx, unavailableScope); return err },
		"failure":  func() error { _, err := s.AddFailure(ctx, unavailableScope, "a", time.Minute); return err },
	} {
		s.downUntil.Store(0)
		require.ErrorIs(t, op(), capacity.ErrStoreUnavailable, name)
	}
}

// TestRecordsFallbackLocal: with Redis unreachable, a FallbackLocal store
// on the records engine admits from its local budget.
func TestRecordsFallbackLocal(t *testing.T) {
	t.Parallel()
	s, err := New(closedClient(t), Options{Engine: EngineRecords, OnUnavailable: FallbackLocal, FallbackFraction: 0.1})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	res, err := s.Reserve(ctx, unavailableReq("a", capacity.Limits{RequestsPerMinute: 600}))
	require.NoError(t, err)
	require.True(t, res.Granted)
	require.Equal(t, 1, s.Stats().FallbackLeases)
	require.NoError(t, s.Settle(ctx, res.Lease, res.Lease.Charges))
}

// TestRecordsAbandonedGrantComesBack: a caller that gives up while its
// reserve is decided does not keep what it was granted.
func TestRecordsAbandonedGrantComesBack(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	s := newRecordsStore(t, rdb, testPrefix(t, rdb), nil)
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "abandon"}
	lim := capacity.Limits{RequestsPerMinute: 60_000, MaxInFlight: 1}
	for i := range 50 {
		ctx, cancel := context.WithCancel(context.Background())
		go cancel() // races the decision: before it, during it or after it
		res, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: lim, Call: fmt.Sprintf("c%d", i), Attempt: 1,
			Charges: capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}})
		if err == nil && res.Granted {
			require.NoError(t, s.Settle(context.Background(), res.Lease, res.Lease.Charges))
		}
	}
	require.Eventually(t, func() bool {
		snap, err := s.Snapshot(context.Background(), sc)
		return err == nil && len(snap.Leases) == 0
	}, 10*time.Second, 10*time.Millisecond, "an abandoned grant holds the slot")
}

// TestRecordsStateLost: records lost while they mattered are counted as a
// reset, and the scope starts again.
func TestRecordsStateLost(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	s := newRecordsStore(t, rdb, prefix, nil)
	ctx := context.Background()
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "lost"}
	req := capacity.Request{Scope: sc, Limits: capacity.Limits{RequestsPerMinute: 60, MaxInFlight: 1}, Call: "c1", Attempt: 1,
		Charges: capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}, TTL: time.Minute}
	res, err := s.Reserve(ctx, req)
	require.NoError(t, err)
	require.True(t, res.Granted)
	keys := s.rec.scope(sc).keys
	require.NoError(t, rdb.Del(ctx, keys[0], keys[1]).Err())
	s.rec.scope(sc).touched = time.Time{} // read first, as after 20 ms
	req.Call = "c2"
	res, err = s.Reserve(ctx, req)
	require.NoError(t, err)
	require.True(t, res.Granted, "the scope starts again")
	require.Equal(t, int64(1), s.Stats().Resets)
}

// TestRecordsVersionsOutliveTheirKeys: after a scope's keys expired (here:
// are deleted) another worker writes it anew; a worker whose copy is of the
// keys before, at the same count of writes, still reads what the other
// wrote, because a scope's first write takes a version of Redis time.
func TestRecordsVersionsOutliveTheirKeys(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	ctx := context.Background()
	a, b := newRecordsStore(t, rdb, prefix, nil), newRecordsStore(t, rdb, prefix, nil)
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "incarnations"}
	req := func(call string) capacity.Request { return slotRequest(sc, 1, call) }
	res, err := a.Reserve(ctx, req("a1"))
	require.NoError(t, err)
	require.True(t, res.Granted)
	require.NoError(t, a.Settle(ctx, res.Lease, res.Lease.Charges))
	writes := a.Stats().Writes

	keys := a.rec.scope(sc).keys
	require.NoError(t, rdb.Del(ctx, keys[0], keys[1]).Err())
	held, err := b.Reserve(ctx, req("b1"))
	require.NoError(t, err)
	require.True(t, held.Granted)
	for i := 0; b.Stats().Writes < writes; i++ {
		res, err := b.Reserve(ctx, req(fmt.Sprintf("b%d", i+2))) // denied: the slot is held
		require.NoError(t, err)
		require.False(t, res.Granted)
	}
	a.rec.scope(sc).touched = time.Time{} // read first, as after 20 ms
	res, err = a.Reserve(ctx, req("a2"))
	require.NoError(t, err)
	require.False(t, res.Granted, "granted beside the slot the other worker holds")
}

// TestRecordsAloneWritesWithoutReading: a worker whose read before a batch
// found that no other worker had written decides its next batches on its
// copy and writes them, one script call each, however long the copy was
// idle; once another worker's write refuses one, it reads first again. And
// a copy whose Redis TIME is recClockFor old reads first whatever it found.
func TestRecordsAloneWritesWithoutReading(t *testing.T) {
	t.Parallel()
	rdb, aRdb := testClient(t), testClient(t)
	calls := &countHook{name: "evalsha"}
	aRdb.AddHook(calls)
	prefix := testPrefix(t, rdb)
	a, b := newRecordsStore(t, aRdb, prefix, nil), newRecordsStore(t, rdb, prefix, nil)
	ctx := context.Background()
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "alone"}
	// call reserves and settles as s after a's copy was idle, and returns
	// the script calls a's reserve took.
	call := func(s *Store, id string) int64 {
		t.Helper()
		a.rec.scope(sc).touched = time.Time{} // idle, as after 20 ms
		before := calls.n.Load()
		res, err := s.Reserve(ctx, slotRequest(sc, 2, id))
		took := calls.n.Load() - before
		require.NoError(t, err)
		require.True(t, res.Granted, id)
		require.NoError(t, s.Settle(ctx, res.Lease, res.Lease.Charges))
		return took
	}
	require.Equal(t, int64(2), call(a, "a1"), "the first call reads the scope, then writes")
	require.Equal(t, int64(2), call(a, "a2"), "an idle copy reads first until a read finds no one else wrote")
	require.Equal(t, int64(1), call(a, "a3"), "a worker alone writes without reading")
	require.Equal(t, int64(1), call(a, "a4"))

	call(b, "b1")
	conflicts := a.Stats().Conflicts
	require.Equal(t, int64(2), call(a, "a5"), "the write on a stale copy is refused and made again")
	require.Equal(t, conflicts+1, a.Stats().Conflicts)
	require.Equal(t, int64(2), call(a, "a6"), "after a refusal the worker reads first again")
	require.Equal(t, int64(1), call(a, "a7"))

	a.rec.scope(sc).readAt = time.Now().Add(-recClockFor - time.Second)
	require.Equal(t, int64(2), call(a, "a8"), "a copy on an old Redis TIME reads first")
	require.Equal(t, int64(1), call(a, "a9"))
}

// TestRecordsReadOfAScopeNeverUsedWritesNothing: reading a scope no worker
// wrote, or lifting its block, leaves Redis without its records, as the
// scripts leave it without a state (`tollgate status` lists only scopes in
// use).
func TestRecordsReadOfAScopeNeverUsedWritesNothing(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	s := newRecordsStore(t, rdb, prefix, nil)
	ctx := context.Background()
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "never-used"}
	_, err := s.Snapshot(ctx, sc)
	require.NoError(t, err)
	_, err = s.Summary(ctx, sc, "c1")
	require.NoError(t, err)
	require.NoError(t, s.Unblock(ctx, sc, false))
	require.Zero(t, rdb.Exists(ctx, s.rec.scope(sc).keys[0]).Val(), "records written")
	scopes, err := s.Scopes(ctx)
	require.NoError(t, err)
	require.Empty(t, scopes)
}

// TestRecordsRefusedFirstWriteDecidesAfresh: a scope never written whose
// credential's block another worker changes between this worker's read and
// its first write: the write is refused, and the batch is decided again on
// a fresh copy, not on the copy that holds what the refused batch did (a
// failure was counted twice).
func TestRecordsRefusedFirstWriteDecidesAfresh(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	a, b := newRecordsStore(t, rdb, prefix, nil), newRecordsStore(t, rdb, prefix, nil)
	ctx := context.Background()
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "refused"}
	other := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o-mini", Credential: "refused"}
	_, err := a.Snapshot(ctx, sc) // a's copy: the scope never written
	require.NoError(t, err)
	require.NoError(t, b.Block(ctx, other, capacity.Block{Reason: capacity.Cooldown, Credential: true, Until: time.Now().Add(time.Minute)}))
	n, err := a.AddFailure(ctx, sc, "call-1", time.Minute)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the refused batch's failure counted again")
}

// TestRecordsForgetIdleCopies: a copy unused for recForgetAfter is dropped
// (a worker that touches many scopes keeps copies of those in use only),
// and the scope's next call reads it whole: the slot another worker holds
// is still held, and the one this worker holds still settles.
func TestRecordsForgetIdleCopies(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	a, b := newRecordsStore(t, rdb, prefix, nil), newRecordsStore(t, rdb, prefix, nil)
	ctx := context.Background()
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "forget"}
	req := func(call string) capacity.Request { return slotRequest(sc, 2, call) }
	mine, err := a.Reserve(ctx, req("a"))
	require.NoError(t, err)
	require.True(t, mine.Granted)
	theirs, err := b.Reserve(ctx, req("b"))
	require.NoError(t, err)
	require.True(t, theirs.Granted)

	a.rec.forget(time.Now().Add(-time.Hour)) // nothing so old: kept
	require.NotNil(t, a.rec.scope(sc).copy)
	a.rec.forget(time.Now().Add(time.Second)) // every copy unused since
	require.Nil(t, a.rec.scope(sc).copy, "the idle copy is kept")

	res, err := a.Reserve(ctx, req("c"))
	require.NoError(t, err)
	require.False(t, res.Granted, "both slots are held, one by the other worker")
	require.NoError(t, a.Settle(ctx, mine.Lease, mine.Lease.Charges))
	res, err = a.Reserve(ctx, req("c"))
	require.NoError(t, err)
	require.True(t, res.Granted)
}

// lateWriteHook holds back, once, the first pipeline that carries a write
// of the records engine, for delay: a Redis pause or a stalled worker
// between the batch's decision and its write.
type lateWriteHook struct {
	delay time.Duration
	done  atomic.Bool
}

func (h *lateWriteHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *lateWriteHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *lateWriteHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			// EVALSHA sha 5 keys... have credHave what: what is a write's time.
			if a := c.Args(); len(a) > 10 && !h.done.Load() {
				if _, err := strconv.ParseInt(fmt.Sprint(a[10]), 10, 64); err == nil && h.done.CompareAndSwap(false, true) {
					time.Sleep(h.delay)
				}
			}
		}
		return next(ctx, cmds)
	}
}

// TestRecordsLateWriteIsDecidedAgain: a write that reaches Redis more than
// recWriteMaxAge after its batch was decided is refused, and the batch
// decided again at Redis's time: the lease it grants has its whole TTL
// ahead of it, not what the delay left (TestChaos, RedisPause, found a call
// sent on a lease that had run out while its write waited).
func TestRecordsLateWriteIsDecidedAgain(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: testClient(t).Options().Addr})
	defer rdb.Close()
	hook := &lateWriteHook{delay: recWriteMaxAge + 500*time.Millisecond}
	rdb.AddHook(hook)
	s := newRecordsStore(t, rdb, testPrefix(t, rdb), nil)
	ctx := context.Background()
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "late"}
	const ttl = 10 * time.Second // the write's delay is under half of it (Store.staleGrant)
	res, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: capacity.Limits{RequestsPerMinute: 60, MaxInFlight: 1}, Call: "c1", Attempt: 1,
		Charges: capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}, TTL: ttl})
	require.NoError(t, err)
	require.True(t, res.Granted)
	require.True(t, hook.done.Load(), "no write was held back")
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	require.Greater(t, res.Lease.Expires.Sub(now), ttl-recWriteMaxAge, "the lease lost the time its write waited")
	require.Positive(t, s.Stats().Conflicts, "the late write was not refused")
}

// slowReplyHook, once armed, holds back the reply of the next command or
// pipeline by delay: Redis stopped between deciding and answering.
type slowReplyHook struct {
	delay time.Duration
	armed atomic.Bool
}

func (h *slowReplyHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *slowReplyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.armed.CompareAndSwap(true, false) {
			time.Sleep(h.delay)
		}
		return err
	}
}
func (h *slowReplyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if h.armed.CompareAndSwap(true, false) {
			time.Sleep(h.delay)
		}
		return err
	}
}

// TestStaleGrantIsGivenBack: on either engine, a grant whose answer took
// half its lease's TTL or more is given back and Reserve fails with
// capacity.ErrStoreUnavailable, so that no call starts on a lease that may
// have run out; the slot is free for the next call.
func TestStaleGrantIsGivenBack(t *testing.T) {
	for _, engine := range []Engine{EngineRecords, EngineScripts} {
		t.Run(engine.String(), func(t *testing.T) {
			t.Parallel()
			rdb := redis.NewClient(&redis.Options{Addr: testClient(t).Options().Addr})
			defer rdb.Close()
			hook := &slowReplyHook{delay: 600 * time.Millisecond}
			rdb.AddHook(hook)
			prefix := testPrefix(t, rdb)
			s, err := New(rdb, Options{Prefix: prefix, Engine: engine})
			require.NoError(t, err)
			defer s.Close()
			ctx := context.Background()
			sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "stale"}
			req := func(call string) capacity.Request {
				return capacity.Request{Scope: sc, Limits: capacity.Limits{RequestsPerMinute: 60, MaxInFlight: 1}, Call: call, Attempt: 1,
					Charges: capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}, TTL: time.Second}
			}
			hook.armed.Store(true)
			_, err = s.Reserve(ctx, req("late"))
			require.ErrorIs(t, err, capacity.ErrStoreUnavailable)
			require.False(t, hook.armed.Load(), "no reply was held back")
			res, err := s.Reserve(ctx, req("next"))
			require.NoError(t, err)
			require.True(t, res.Granted, "the stale grant's slot was not given back")
		})
	}
}

// TestRecordsNowAtTheAnswer: the records engine gives the Now of a
// reservation that holds a ticket at the answer, not at the decision
// (capacity.Reservation.HoldsTicket): a ticket whose answer took 300 ms to
// come back after its batch was decided says its wait is that much
// shorter, so that its holder, who sleeps RetryAt.Sub(Now) from the answer
// (capacity.Wait), claims when the ticket comes due, not 300 ms after. The
// scope grants one request a second; the ticket comes due a second after
// the first grant.
func TestRecordsNowAtTheAnswer(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: testClient(t).Options().Addr})
	defer rdb.Close()
	const delay = 300 * time.Millisecond
	hook := &slowReplyHook{delay: delay}
	rdb.AddHook(hook)
	s := newRecordsStore(t, rdb, testPrefix(t, rdb), nil)
	ctx := context.Background()
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "answer"}
	req := func(call string) capacity.Request {
		return capacity.Request{Scope: sc, Limits: capacity.Limits{RequestsPerMinute: 60, Burst: time.Second, SafetyMargin: 1},
			Call: call, Attempt: 1, Charges: capacity.Charges{capacity.Requests: 1}, TTL: time.Minute, Book: true}
	}
	first, err := s.Reserve(ctx, req("first"))
	require.NoError(t, err)
	require.True(t, first.Granted)

	hook.armed.Store(true)
	res, err := s.Reserve(ctx, req("booked"))
	require.NoError(t, err)
	require.False(t, hook.armed.Load(), "no reply was held back")
	require.True(t, res.Booked, "%+v", res)
	require.False(t, res.Granted)
	require.True(t, res.HoldsTicket(), "%+v", res)
	wait := res.RetryAt.Sub(res.Now)
	t.Logf("the ticket's wait from the answer: %v", wait)
	require.LessOrEqual(t, wait, time.Second-delay+50*time.Millisecond,
		"Now is the decision's time: the holder would claim the time the answer took late")
}

// TestExchangeArgumentsLayout: the Go side sends as many arguments before
// the changed records as lua/exchange.lua reads (FIRST_RECORD), and the
// EVALSHA command holds the keys and then exactly those arguments.
func TestExchangeArgumentsLayout(t *testing.T) {
	src, err := luaFiles.ReadFile("lua/exchange.lua")
	require.NoError(t, err)
	m := regexp.MustCompile(`local FIRST_RECORD = (\d+)`).FindSubmatch(src)
	require.NotNil(t, m, "lua/exchange.lua names FIRST_RECORD")
	first, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	require.Equal(t, recArgsFixed+1, first)

	keys := []string{"k1", "k2", "k3", "k4", "k5"}
	a := &recArgs{have: 3, credHave: 4, what: "read", names: []string{"lc"}, values: [][]byte{[]byte("v")}}
	c := a.command(nil, recCommandHead(keys), keys)
	require.Equal(t, []any{"evalsha", recExchange.Hash(), len(keys), "k1", "k2", "k3", "k4", "k5"}, c.cmd[:3+len(keys)])
	require.Len(t, c.args(), recArgsFixed+2)
	require.Equal(t, []any{"lc", []byte("v")}, c.args()[recArgsFixed:])
	require.Equal(t, int64(3), c.args()[0])
}

// TestRecordsRefusedBatchTakesIn: a batch whose write another worker's
// write refused takes in the operations that arrived on its Store while it
// was out, and the retry decides them all in one write, rather than
// deciding the refused batch alone and the others in a batch after it that
// meets the contention again. One worker's write is held at Redis's door
// while five more calls queue behind it and a second worker writes the
// scope: the first worker then writes once for the six calls.
func TestRecordsRefusedBatchTakesIn(t *testing.T) {
	t.Parallel()
	addr := testClient(t).Options().Addr
	rdbA := redis.NewClient(&redis.Options{Addr: addr})
	defer rdbA.Close()
	hook := &heldWriteHook{entered: make(chan struct{}), release: make(chan struct{})}
	rdbA.AddHook(hook)
	rdbB := redis.NewClient(&redis.Options{Addr: addr})
	defer rdbB.Close()
	prefix := testPrefix(t, rdbA)
	a, b := newRecordsStore(t, rdbA, prefix, nil), newRecordsStore(t, rdbB, prefix, nil)
	ctx := context.Background()
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "takein"}
	req := func(call string) capacity.Request {
		return capacity.Request{Scope: sc, Limits: capacity.Limits{RequestsPerMinute: 6000},
			Call: call, Attempt: 1, Charges: capacity.Charges{capacity.Requests: 1}, TTL: time.Minute}
	}
	res, err := a.Reserve(ctx, req("warm"))
	require.NoError(t, err)
	require.True(t, res.Granted)
	before := a.Stats()

	const queued = 5
	results := make(chan capacity.Reservation, queued+1)
	reserve := func(call string) {
		res, err := a.Reserve(ctx, req(call))
		assert(t, err == nil, "%s: %v", call, err)
		results <- res
	}
	hook.armed.Store(true)
	go reserve("first")
	<-hook.entered // the first call's write is on its way, held
	for i := range queued {
		go reserve("queued-" + strconv.Itoa(i))
	}
	rs := a.rec.scope(sc)
	require.Eventually(t, func() bool {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		return len(rs.pending) == queued
	}, 5*time.Second, time.Millisecond, "the queued calls wait behind the held batch")
	res, err = b.Reserve(ctx, req("other worker"))
	require.NoError(t, err)
	require.True(t, res.Granted)
	close(hook.release)

	for range queued + 1 {
		res := <-results
		require.True(t, res.Granted, "%+v", res)
	}
	after := a.Stats()
	require.Equal(t, int64(1), after.Conflicts-before.Conflicts, "the held write was refused once")
	require.Equal(t, int64(1), after.Writes-before.Writes,
		"the refused batch and the calls queued behind it were written together")
}

// heldWriteHook, once armed, holds the next pipeline that writes (an
// exchange that is not a read) until release is closed, after closing
// entered.
type heldWriteHook struct {
	armed            atomic.Bool
	entered, release chan struct{}
}

func (h *heldWriteHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *heldWriteHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *heldWriteHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.writes(cmds) && h.armed.CompareAndSwap(true, false) {
			close(h.entered)
			<-h.release
		}
		return next(ctx, cmds)
	}
}

// writes reports whether cmds hold an exchange that writes: one whose
// arguments do not say "read".
func (h *heldWriteHook) writes(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		args := c.Args()
		if len(args) == 0 || args[0] != "evalsha" {
			continue
		}
		if !slices.Contains(args, any("read")) {
			return true
		}
	}
	return false
}

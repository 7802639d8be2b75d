package redisstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
)

// TestEnginesShareOneBudget runs the contract suite, the class cases and
// the fair cases on two workers of one prefix taking turns, one on the
// scripts and one on the records engine: whichever touches a scope first
// gives it its state, and the other runs its operations on that engine.
func TestEnginesShareOneBudget(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	factory := func(t *testing.T, clock capacity.Clock) capacity.Store {
		prefix := testPrefix(t, rdb)
		scripts, err := New(rdb, Options{Engine: EngineScripts, Prefix: prefix, Clock: clock})
		require.NoError(t, err)
		t.Cleanup(func() { _ = scripts.Close() })
		return &recPair{a: scripts, b: newRecordsStore(t, rdb, prefix, clock)}
	}
	// A half-open block of the credential lets one probe through for each
	// engine that holds some of its scopes: each engine marks the probe
	// claimed in its own key (the package doc, The records engine).
	var contract []storetest.Case
	for _, c := range storetest.Cases() {
		if c.Name() != "HalfOpenBlockLetsOneProbeThrough" {
			contract = append(contract, c)
		}
	}
	storetest.RunCases(t, contract, factory)
	storetest.RunCases(t, storetest.ClassCases, factory)
	storetest.RunCases(t, storetest.FairCases, factory)
}

// TestEnginesHandOver: a scope the scripts hold stays with them for a
// worker on the records engine, and once its state is gone (expired) the
// records engine takes it, for a worker on the scripts too. Throughout, its
// one in-flight slot is held once.
func TestEnginesHandOver(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	ctx := context.Background()
	scripts, err := New(rdb, Options{Engine: EngineScripts, Prefix: prefix})
	require.NoError(t, err)
	defer scripts.Close()
	recRdb := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr})
	defer recRdb.Close()
	exchanges := &pipelineCounter{}
	recRdb.AddHook(exchanges)
	records := newRecordsStore(t, recRdb, prefix, nil)
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "handover"}
	req := func(call string) capacity.Request { return slotRequest(sc, 1, call) }
	held, err := scripts.Reserve(ctx, req("a"))
	require.NoError(t, err)
	require.True(t, held.Granted)
	res, err := records.Reserve(ctx, req("b"))
	require.NoError(t, err)
	require.False(t, res.Granted, "the slot the scripts granted is held for the records engine's worker too")
	require.NoError(t, records.Settle(ctx, held.Lease, held.Lease.Charges), "a lease of the scripts settles from the other engine")
	res, err = records.Reserve(ctx, req("b"))
	require.NoError(t, err)
	require.True(t, res.Granted)
	require.NoError(t, records.Settle(ctx, res.Lease, res.Lease.Charges))
	require.Zero(t, records.Stats().Writes, "the records engine wrote nothing while the scripts held the scope")
	engine, ok, err := records.EngineOf(ctx, sc)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, EngineScripts, engine)
	require.EqualValues(t, 1, exchanges.n.Load(), "once it found the scripts holding the scope, it sent them its operations")

	// The scripts' state expires (here: is deleted) once it stops
	// mattering: the next worker to touch the scope, on the records
	// engine, gives it records, and the scripts' worker follows.
	k := scripts.keysFor(sc)
	require.NoError(t, rdb.Del(ctx, k.keys[keyEpoch+1:keyRecords]...).Err())
	records.keysFor(sc).onScriptsAt.Store(0) // heldMemory later
	held, err = records.Reserve(ctx, req("c"))
	require.NoError(t, err)
	require.True(t, held.Granted)
	require.Positive(t, records.Stats().Writes)
	res, err = scripts.Reserve(ctx, req("d"))
	require.NoError(t, err)
	require.False(t, res.Granted, "the slot the records engine granted is held for the scripts' worker too")
	n, err := rdb.Exists(ctx, k.keys[keyState]).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the scripts gave the scope a state beside its records")
	engine, ok, err = scripts.EngineOf(ctx, sc)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, EngineRecords, engine)
	_, ok, err = scripts.EngineOf(ctx, capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "o3", Credential: "handover"})
	require.NoError(t, err)
	require.False(t, ok, "a scope never used rests")
	snap, err := scripts.Snapshot(ctx, sc)
	require.NoError(t, err)
	require.Len(t, snap.Leases, 1)
	require.Equal(t, "c", snap.Leases[0].Call)
	failures, err := scripts.AddFailure(ctx, sc, "c", time.Minute)
	require.NoError(t, err)
	require.Equal(t, 1, failures)
	failures, err = records.AddFailure(ctx, sc, "c", time.Minute)
	require.NoError(t, err)
	require.Equal(t, 2, failures, "one failure count, whichever engine counts")
	require.NoError(t, scripts.Settle(ctx, held.Lease, held.Lease.Charges))
	res, err = scripts.Reserve(ctx, req("d"))
	require.NoError(t, err)
	require.True(t, res.Granted)

	// The records expire in turn: the scripts' worker, once it has not
	// found them for heldMemory, starts the scope on its own engine again.
	require.NoError(t, scripts.Settle(ctx, res.Lease, res.Lease.Charges))
	rk := records.rec.scope(sc).keys
	require.NoError(t, rdb.Del(ctx, rk[0], rk[1]).Err())
	scripts.keysFor(sc).onRecordsAt.Store(0) // heldMemory later
	res, err = scripts.Reserve(ctx, req("e"))
	require.NoError(t, err)
	require.True(t, res.Granted)
	engine, ok, err = records.EngineOf(ctx, sc)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, EngineScripts, engine, "a scripts worker kept sending the scope to the records engine")
}

// pipelineCounter counts the records engine's exchanges a client sends.
type pipelineCounter struct{ n atomic.Int64 }

func (c *pipelineCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (c *pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (c *pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if args := cmd.Args(); len(args) > 1 && cmd.Name() == "evalsha" && args[1] == recExchange.Hash() {
				c.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

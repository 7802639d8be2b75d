package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
)

// skewedClock is the system clock off by a fixed amount.
type skewedClock struct{ by time.Duration }

func (c skewedClock) Now() time.Time { return time.Now().Add(c.by) }
func (c skewedClock) NewTimer(d time.Duration) capacity.Timer {
	return capacity.SystemClock{}.NewTimer(d)
}

// TestBlockFromASlowWorkerClock: a worker whose clock is 3 s behind Redis
// blocks a scope for the 10 s it means, in Redis time, not for the 7 s left
// of an instant its clock names (failure 7 of issue 13: a cooldown written
// by a slow worker had already ended).
func TestBlockFromASlowWorkerClock(t *testing.T) {
	t.Parallel()
	for _, credential := range []bool{false, true} {
		s, rdb := newTestStore(t, Options{Engine: EngineScripts})
		s.local = skewedClock{by: -3 * time.Second}
		ctx := context.Background()
		l := capacity.Limits{RequestsPerMinute: 60}
		_, err := s.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: "a", Attempt: 1, Charges: oneCharge()})
		require.NoError(t, err)
		// The block is asked for at some Redis time in [before, after]: it
		// must end 10 s after that, in Redis's clock, whatever the
		// machine's delays (the slow clock's reading would end it 7 s
		// after).
		before := redisNow(t, rdb)
		require.NoError(t, s.Block(ctx, keysScope, capacity.Block{Reason: capacity.Cooldown, Until: s.localNow().Add(10 * time.Second), Credential: credential}))
		after := redisNow(t, rdb)
		res, err := s.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: "b", Attempt: 1, Charges: oneCharge()})
		require.NoError(t, err)
		require.Equal(t, capacity.DenyBlocked, res.Reason)
		const tick = time.Millisecond // the clocks' rounding
		require.False(t, res.RetryAt.Before(before.Add(10*time.Second-tick)), "credential %v: blocked until %v after the block began", credential, res.RetryAt.Sub(before))
		require.False(t, res.RetryAt.After(after.Add(10*time.Second+tick)), "credential %v: blocked until %v after the block was set", credential, res.RetryAt.Sub(after))
	}
}

// TestSnapshotWritesNothing: reading a scope (what the plugin's budget
// gauges do on every metrics collection) changes nothing in Redis, even when
// leases expired and tickets lapsed since the last write (failure 9 of
// issue 13: every collection ran a state-changing script per scope).
func TestSnapshotWritesNothing(t *testing.T) {
	t.Parallel()
	clock := capacitytest.NewManualClock(storetest.Epoch)
	s, rdb := newTestStore(t, Options{Engine: EngineScripts, Clock: clock})
	ctx := context.Background()
	l := capacity.Limits{RequestsPerMinute: 60, Burst: time.Second, SafetyMargin: 1}
	req := func(call string, book bool) capacity.Request {
		return capacity.Request{Scope: keysScope, Limits: l, Call: call, Attempt: 1, Charges: oneCharge(), TTL: time.Second, Book: book}
	}
	res, err := s.Reserve(ctx, req("held", false))
	require.NoError(t, err)
	require.True(t, res.Granted)
	res, err = s.Reserve(ctx, req("booked", true))
	require.NoError(t, err)
	require.True(t, res.Booked)
	clock.Advance(time.Hour) // the lease expired, the ticket lapsed
	dump := func() map[string]string {
		out := map[string]string{}
		for key := range allKeys(t, rdb, s.opts.Prefix) {
			v, err := rdb.Dump(ctx, key).Result()
			require.NoError(t, err)
			out[key] = v
		}
		return out
	}
	before := dump()
	snap, err := s.Snapshot(ctx, keysScope)
	require.NoError(t, err)
	require.Empty(t, snap.Leases, "the expired lease is not shown")
	require.Empty(t, snap.Tickets, "nor the lapsed ticket")
	require.Equal(t, before, dump(), "a snapshot writes nothing")
}

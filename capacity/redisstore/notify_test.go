package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestReleasedWakesTheHead: a release wakes the longest waiter only; stop
// takes a waiter off the queue.
func TestReleasedWakesTheHead(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t, Options{Engine: EngineScripts})
	ctx := context.Background()
	l := capacity.Limits{RequestsPerMinute: 600, MaxInFlight: 1}
	res, err := s.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: "a", Attempt: 1, Charges: oneCharge()})
	require.NoError(t, err)
	// The first waiter subscribes the scope's channel in the background, and
	// the subscription's confirmation wakes the head once (releases may have
	// been missed while it was made): let a probe take that wake-up first.
	probe, stopProbe := s.Released(keysScope)
	select {
	case <-probe:
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription was never confirmed")
	}
	stopProbe()
	first, stop1 := s.Released(keysScope)
	gone, stopGone := s.Released(keysScope)
	second, stop2 := s.Released(keysScope)
	defer stop2()
	stopGone()
	require.True(t, closed(gone), "stop closes the channel")

	require.NoError(t, s.Settle(ctx, res.Lease, res.Lease.Charges))
	require.True(t, closed(first), "the head is woken")
	require.False(t, closed(second), "the others wait their turn")
	stop1()
	res, err = s.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: "b", Attempt: 1, Charges: oneCharge()})
	require.NoError(t, err)
	require.True(t, res.Granted)
	require.NoError(t, s.Release(ctx, res.Lease))
	require.True(t, closed(second))
}

// TestReleasedAcrossWorkers: a settle on one store wakes a waiter of
// another, through sharded pub/sub.
func TestReleasedAcrossWorkers(t *testing.T) {
	t.Parallel()
	a, rdb := newTestStore(t, Options{Engine: EngineScripts})
	b, err := New(rdb, Options{Engine: EngineScripts, Prefix: a.opts.Prefix})
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	l := capacity.Limits{RequestsPerMinute: 600, MaxInFlight: 1}
	held, err := a.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: "a", Attempt: 1, Charges: oneCharge(), TTL: time.Minute})
	require.NoError(t, err)
	ch, stop := b.Released(keysScope)
	defer stop()
	denied, err := b.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: "b", Attempt: 1, Charges: oneCharge()})
	require.NoError(t, err)
	require.False(t, denied.Granted)
	// The subscription is made in the background; its confirmation may
	// wake the waiter once (the state may have changed while it was made).
	time.Sleep(200 * time.Millisecond)
	if closed(ch) {
		stop()
		ch, stop = b.Released(keysScope)
		defer stop()
	}
	require.NoError(t, a.Settle(ctx, held.Lease, held.Lease.Charges))
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("the other worker's waiter was not woken")
	}
}

package interceptor

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
)

// stuckHeartbeats is an activity outbound whose heartbeats wait until
// release is closed, as the SDK's do for up to the client's RPC timeout
// while the Temporal server cannot be reached.
type stuckHeartbeats struct {
	sdkinterceptor.ActivityOutboundInterceptorBase
	beats   atomic.Int32
	release chan struct{}
	once    sync.Once
}

func (o *stuckHeartbeats) RecordHeartbeat(context.Context, ...any) {
	o.beats.Add(1)
	<-o.release
}

// free lets every heartbeat return, now and later.
func (o *stuckHeartbeats) free() { o.once.Do(func() { close(o.release) }) }

// stuckHeartbeatCall returns a gated call of a heartbeating activity
// whose heartbeats get stuck, with a lease of 3 s (the least LeaseTTL) on
// a memory store, all on clock.
func stuckHeartbeatCall(t *testing.T, clock *capacitytest.ManualClock) (*gatedCall, *stuckHeartbeats, capacity.Lease) {
	t.Helper()
	store := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
	o, err := Options{Store: store, Limits: func(capacity.Scope) (capacity.Limits, bool) { return capacity.Limits{}, true },
		LeaseTTL: 3 * time.Second, Clock: clock, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))}.withDefaults()
	require.NoError(t, err)
	out := &stuckHeartbeats{release: make(chan struct{})}
	t.Cleanup(out.free)
	g := &gatedCall{a: &activityInbound{outbound: out}, opts: &o, info: activity.Info{HeartbeatTimeout: 3 * time.Second},
		scope: capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "m", Credential: "a"}, state: &callState{}}
	g.state.setDetails(nil) // the activity heartbeats: the gate may too
	var c capacity.Charges
	c[capacity.Requests], c[capacity.InFlight] = 1, 1
	res, err := store.Reserve(context.Background(), capacity.Request{Scope: g.scope, Limits: capacity.Limits{RequestsPerMinute: 60, MaxInFlight: 1},
		Call: "c", Attempt: 1, Charges: c, TTL: o.LeaseTTL})
	require.NoError(t, err)
	require.True(t, res.Granted)
	return g, out, res.Lease
}

// A heartbeat stuck on an unreachable Temporal server does not stop the
// keepalive from renewing the lease of a call at the provider: the store
// never gives its slot away while the call runs.
func TestKeepaliveRenewsWhileAHeartbeatIsStuck(t *testing.T) {
	clock := capacitytest.NewManualClock(time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC))
	g, out, lease := stuckHeartbeatCall(t, clock)
	ka := g.startKeepalive(context.Background(), lease)
	expiry := func() time.Time {
		snap, err := g.opts.Store.Snapshot(context.Background(), g.scope)
		if err != nil || len(snap.Leases) != 1 {
			return time.Time{}
		}
		return snap.Leases[0].Expires
	}
	for i := range 5 { // 5 s: past the lease's first expiry
		// The keepalive's timer, and at first the heartbeat's (stuck after
		// its first beat, it sets no other): advancing before both are set
		// would fire one alone.
		timers := 1
		if i == 0 {
			timers = 2
		}
		require.Eventually(t, func() bool { return clock.Waiters() >= timers }, 5*time.Second, time.Millisecond)
		clock.Advance(time.Second)
		require.Eventually(t, func() bool { return expiry().Equal(clock.Now().Add(3 * time.Second)) }, 5*time.Second, time.Millisecond,
			"renewed at %v although a heartbeat is stuck", clock.Now())
	}
	assert.Positive(t, out.beats.Load(), "a heartbeat was under way")
	l := ka.stop()
	assert.Equal(t, clock.Now().Add(3*time.Second), l.Expires, "stop returns the renewed lease without waiting for the heartbeat")
}

// Stopping the heartbeats of a wait without waiting for a stuck one
// returns at once (admission does, then sends the call on its fresh
// lease); stopping them waiting returns once the heartbeat does.
func TestHeartbeatDuringStopsWithoutWaiting(t *testing.T) {
	clock := capacitytest.NewManualClock(time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC))
	g, out, _ := stuckHeartbeatCall(t, clock)
	stop := g.heartbeatDuring(context.Background(), false)
	require.Eventually(t, func() bool { return clock.Waiters() > 0 }, 5*time.Second, time.Millisecond)
	clock.Advance(time.Second)
	require.Eventually(t, func() bool { return out.beats.Load() == 1 }, 5*time.Second, time.Millisecond)
	stop(false) // returns although the heartbeat is stuck
	stop(false) // and may be called again

	stop = g.heartbeatDuring(context.Background(), false)
	require.Eventually(t, func() bool { return clock.Waiters() > 0 }, 5*time.Second, time.Millisecond)
	clock.Advance(time.Second)
	require.Eventually(t, func() bool { return out.beats.Load() == 2 }, 5*time.Second, time.Millisecond)
	stopped := make(chan struct{})
	go func() { stop(true); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("stop(true) returned while the heartbeat was under way")
	case <-time.After(50 * time.Millisecond):
	}
	out.free()
	<-stopped
}

package interceptor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/interceptor"
)

func TestLeaseIsRenewedDuringALongCall(t *testing.T) {
	clock := capacitytest.NewManualClock(time.Now())
	store := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
	e := newEnvWithStore(t, store, rpmLimits(6000), func(o *interceptor.Options) {
		o.Clock = clock
		o.LeaseTTL = time.Minute
	})
	var renewed, survived bool
	e.acts.during = func(ctx context.Context, in ChatInput) {
		leaseExpiry := func() time.Time {
			snap, err := store.Snapshot(ctx, gpt4o)
			if err != nil || len(snap.Leases) != 1 {
				return time.Time{}
			}
			return snap.Leases[0].Expires
		}
		first := leaseExpiry()
		// The keepalive arms its timer on its own goroutine: moving the
		// clock before would leave that timer in the future.
		require.Eventually(t, func() bool { return clock.Waiters() > 0 }, 2*time.Second, time.Millisecond, "the keepalive never armed its timer")
		clock.Advance(25 * time.Second) // past a third of the TTL: the keepalive renews
		renewed = assert.Eventually(t, func() bool { return leaseExpiry().After(first) }, 5*time.Second, time.Millisecond)
		clock.Advance(40 * time.Second) // past the first expiry
		survived = !leaseExpiry().IsZero()
	}
	out := e.run(t, Step{In: call("gpt-4o", "team-a")})
	require.True(t, out[0].OK)
	assert.True(t, renewed, "renewed while the call ran")
	assert.True(t, survived, "alive past its first TTL")
	snap, err := store.Snapshot(context.Background(), gpt4o)
	require.NoError(t, err)
	assert.Empty(t, snap.Leases, "settled at the end")
}

// lostSettles drops the settlement of first attempts, as a worker that dies
// mid-call would.
type lostSettles struct{ *capacity.MemoryStore }

func (s lostSettles) Settle(ctx context.Context, l capacity.Lease, final capacity.Charges) error {
	if l.Attempt == 1 {
		return nil
	}
	return s.MemoryStore.Settle(ctx, l, final)
}

func TestRetryReleasesThePreviousAttemptsLease(t *testing.T) {
	store := capacity.NewMemoryStore(capacity.MemoryOptions{})
	e := newEnvWithStore(t, store, capacity.Limits{RequestsPerMinute: 6000, MaxInFlight: 1, SafetyMargin: 1, Burst: time.Second}, func(o *interceptor.Options) {
		o.Store = lostSettles{store}
		o.Clock = nil
	}, serverError())
	out := e.run(t, Step{In: call("gpt-4o", "team-a")})
	require.True(t, out[0].OK)
	log := e.attemptLog()
	require.Len(t, log, 2)
	assert.True(t, tgerrors.IsTransient(log[0].err))
	assert.NoError(t, log[1].err, "attempt 2 took the slot attempt 1 never gave back")
	snap, err := store.Snapshot(context.Background(), gpt4o)
	require.NoError(t, err)
	assert.Empty(t, snap.Leases)
}

func TestPluginTwiceGatesOnce(t *testing.T) {
	l := capacity.Limits{RequestsPerMinute: 60, TokensPerMinute: 60000, SafetyMargin: 1, Burst: time.Second}
	e := newEnvPlugins(t, nil, l, nil, 2)
	out := e.run(t, Step{In: call("gpt-4o", "team-a")})
	require.True(t, out[0].OK)
	require.Len(t, e.attemptLog(), 1, "granted once, not denied by a second gate")
	snap, err := e.store.Snapshot(context.Background(), gpt4o)
	require.NoError(t, err)
	assert.InDelta(t, 0, snap.Level[capacity.Requests], 1e-9, "charged once")
	// 100 tokens used against 61 reserved: the overrun is debt, once.
	assert.InDelta(t, 1000-100, snap.Level[capacity.Tokens], 1e-9, "settled once")
}

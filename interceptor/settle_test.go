package interceptor_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
)

// slowSettles delays every settlement by delay, or until the test ends if
// delay is zero, whatever its context says: a stalled Redis holds a settle
// that is already on the wire the same way.
type slowSettles struct {
	*capacity.MemoryStore
	delay time.Duration
	stall chan struct{}
}

func newSlowSettles(t *testing.T, store *capacity.MemoryStore, delay time.Duration) slowSettles {
	s := slowSettles{MemoryStore: store, delay: delay, stall: make(chan struct{})}
	t.Cleanup(func() { close(s.stall) })
	return s
}

func (s slowSettles) Settle(ctx context.Context, l capacity.Lease, final capacity.Charges) error {
	if s.delay == 0 {
		<-s.stall
		return context.Canceled
	}
	time.Sleep(s.delay)
	return s.MemoryStore.Settle(ctx, l, final)
}

// settleFailures sums tollgate.settle.failures by reason.
func settleFailures(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "tollgate.settle.failures" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				reason, _ := dp.Attributes.Value("reason")
				out[reason.AsString()] += dp.Value
			}
		}
	}
	return out
}

// A settle slower than the heartbeat timeout but within SettleTimeout: the
// gate heartbeats until it lands, so the attempt is not timed out and the
// call is not made again.
func TestSlowSettleKeepsTheAttemptAlive(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	store := capacity.NewMemoryStore(capacity.MemoryOptions{})
	e := newEnvWithStore(t, store, rpmLimits(6000), func(o *interceptor.Options) {
		o.Store = newSlowSettles(t, store, 900*time.Millisecond)
		o.SettleTimeout = 5 * time.Second
		o.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	})
	out := e.run(t, Step{In: call("gpt-4o", "team-a"), Heartbeat: 300 * time.Millisecond})
	require.True(t, out[0].OK, out[0].Type)
	assert.Len(t, e.attemptLog(), 1, "one attempt")
	assert.Equal(t, int64(1), e.provider.calls.Load(), "one provider call")
	snap, err := store.Snapshot(context.Background(), gpt4o)
	require.NoError(t, err)
	assert.Empty(t, snap.Leases, "settled")
	assert.Empty(t, settleFailures(t, reader))
}

// heldSettles holds every settlement until release is closed (or a safety
// net of a minute passed, so a gate that waits for it fails the test
// instead of hanging it), then settles; landed counts the settlements done.
type heldSettles struct {
	*capacity.MemoryStore
	release chan struct{}
	landed  *atomic.Int32
}

func newHeldSettles(store *capacity.MemoryStore) heldSettles {
	return heldSettles{MemoryStore: store, release: make(chan struct{}), landed: new(atomic.Int32)}
}

func (s heldSettles) Settle(ctx context.Context, l capacity.Lease, final capacity.Charges) error {
	select {
	case <-s.release:
	case <-time.After(time.Minute):
	}
	defer s.landed.Add(1)
	return s.MemoryStore.Settle(ctx, l, final)
}

// timerLog is a capacity.Clock that records the length of every timer the
// gate sets, so a test reads how long the gate chose to wait on the
// injected clock instead of timing it.
type timerLog struct {
	capacity.Clock
	mu   sync.Mutex
	durs []time.Duration
}

// NewTimer records d and returns the wrapped clock's timer.
func (c *timerLog) NewTimer(d time.Duration) capacity.Timer {
	c.mu.Lock()
	c.durs = append(c.durs, d)
	c.mu.Unlock()
	return c.Clock.NewTimer(d)
}

// timers returns the lengths of the timers set so far.
func (c *timerLog) timers() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.durs)
}

// A settle slower than SettleTimeout: the activity returns the provider's
// answer after waiting SettleTimeout (the one timer the gate sets), before
// the settle lands, and counts the settle as timed out; the settle still
// lands later and frees the slot.
func TestStalledSettleReturnsTheAnswer(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	store := capacity.NewMemoryStore(capacity.MemoryOptions{})
	held := newHeldSettles(store)
	var clock *timerLog
	e := newEnvWithStore(t, store, rpmLimits(6000), func(o *interceptor.Options) {
		o.Store = held
		o.SettleTimeout = 200 * time.Millisecond
		o.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		clock = &timerLog{Clock: o.Clock}
		o.Clock = clock
	})
	out := e.run(t, Step{In: call("gpt-4o", "team-a"), Heartbeat: 300 * time.Millisecond})
	assert.Zero(t, held.landed.Load(), "returned before the settle landed")
	close(held.release)
	require.True(t, out[0].OK, out[0].Type)
	assert.Len(t, e.attemptLog(), 1, "one attempt")
	assert.Equal(t, int64(1), e.provider.calls.Load(), "one provider call")
	assert.Contains(t, clock.timers(), 200*time.Millisecond, "waited SettleTimeout for the settle")
	assert.Equal(t, map[string]int64{"timeout": 1}, settleFailures(t, reader))
	assert.Eventually(t, func() bool {
		snap, err := store.Snapshot(context.Background(), gpt4o)
		return err == nil && len(snap.Leases) == 0
	}, 30*time.Second, 10*time.Millisecond, "the late settle freed the slot")
	assert.Equal(t, int32(1), held.landed.Load(), "the settle landed")
}

// The settle budget stays under half of what is left of the attempt, so a
// stalled settle never runs into the start-to-close timeout: with a
// SettleTimeout of a minute and a start-to-close of 3 s, the gate waits
// at most 1.5 s on its clock for the settle.
func TestStalledSettleStaysInsideStartToClose(t *testing.T) {
	store := capacity.NewMemoryStore(capacity.MemoryOptions{})
	var clock *timerLog
	e := newEnvWithStore(t, store, rpmLimits(6000), func(o *interceptor.Options) {
		o.Store = newSlowSettles(t, store, 0)
		o.SettleTimeout = time.Minute
		clock = &timerLog{Clock: capacity.SystemClock{}} // the clock of the attempt's deadline
		o.Clock = clock
	})
	out := e.run(t, Step{In: call("gpt-4o", "team-a"), StartToClose: 3 * time.Second})
	require.True(t, out[0].OK, out[0].Type)
	assert.Len(t, e.attemptLog(), 1, "one attempt")
	assert.Equal(t, int64(1), e.provider.calls.Load(), "one provider call")
	// The lease's keepalive (a renewal timer) stops before the settle, and
	// this step does not heartbeat: the last timer is the settle's.
	timers := clock.timers()
	require.NotEmpty(t, timers, "the gate set its settle timer")
	assert.LessOrEqual(t, timers[len(timers)-1], 1500*time.Millisecond, "half of the attempt's start-to-close at most, of %v", timers)
}

// blocksAtSettle records, at each settle, the blocks already on the
// settled lease's scope.
type blocksAtSettle struct {
	*capacity.MemoryStore
	mu   sync.Mutex
	seen [][]capacity.BlockReason
}

func (s *blocksAtSettle) Settle(ctx context.Context, l capacity.Lease, final capacity.Charges) error {
	snap, err := s.MemoryStore.Snapshot(ctx, l.Scope)
	if err != nil {
		return err
	}
	var reasons []capacity.BlockReason
	for _, b := range snap.Blocks {
		reasons = append(reasons, b.Reason)
	}
	s.mu.Lock()
	s.seen = append(s.seen, reasons)
	s.mu.Unlock()
	return s.MemoryStore.Settle(ctx, l, final)
}

// A failure that blocks the scope blocks it before the call's settle gives
// its reservation back: the refund wakes waiting calls, and none may be
// admitted in between to meet the same answer. A 429's cooldown comes after
// the settle, as it always has: its cut works on the level the settle and
// the report leave (set before them, TestOverload/LimitDrop drew 23 × 429s
// when the cooldown ended).
func TestBlockBeforeSettle(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply reply
		want  capacity.BlockReason // 0: no block yet
	}{
		{"RateLimited", rateLimited("2"), 0},
		{"QuotaExhausted", quotaExhausted(), capacity.QuotaExhausted},
		{"BadCredential", badKey(), capacity.CredentialDisabled},
		{"Overloaded", overloaded(), capacity.Overloaded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &blocksAtSettle{MemoryStore: capacity.NewMemoryStore(capacity.MemoryOptions{})}
			e := newEnvWithStore(t, store.MemoryStore, rpmLimits(6000), func(o *interceptor.Options) {
				o.Store = store
				o.BreakerThreshold = 1 // the first overload opens the breaker
			}, tc.reply)
			e.run(t, Step{In: call("gpt-4o", "team-a")})
			store.mu.Lock()
			defer store.mu.Unlock()
			require.NotEmpty(t, store.seen, "settled")
			if tc.want == 0 {
				assert.Empty(t, store.seen[0], "not yet blocked when the failed call settled")
				return
			}
			assert.Contains(t, store.seen[0], tc.want, "blocked when the failed call settled")
		})
	}
}

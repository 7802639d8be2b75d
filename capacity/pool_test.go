package capacity_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
)

// TestSnapshotPoolState: what a key pool reads of a member scope from its
// snapshot (OutBlock, Paused, Used), block by block and budget by budget.
func TestSnapshotPoolState(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "key-1"}
	other := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o-mini", Credential: "key-1"}
	limits := capacity.Limits{RequestsPerMinute: 60, MaxInFlight: 4, SafetyMargin: 1, Burst: 10 * time.Second} // a 10-request bucket
	var c capacity.Charges
	c[capacity.Requests], c[capacity.InFlight] = 1, 1

	for _, tc := range []struct {
		name     string
		setup    func(t *testing.T, s *capacity.MemoryStore)
		out      capacity.BlockReason // 0: not out
		paused   time.Duration
		used     float64
		scopeNow capacity.Scope // the scope snapshotted; zero: sc
	}{
		{name: "never used", setup: func(*testing.T, *capacity.MemoryStore) {}},
		{name: "two calls in flight: half the slots", setup: func(t *testing.T, s *capacity.MemoryStore) {
			for _, call := range []string{"a", "b"} {
				r, err := s.Reserve(context.Background(), capacity.Request{Scope: sc, Limits: limits, Call: call, Attempt: 1, Charges: c})
				require.NoError(t, err)
				require.True(t, r.Granted)
			}
		}, used: 0.5},
		{name: "cooldown pauses", setup: func(t *testing.T, s *capacity.MemoryStore) {
			require.NoError(t, s.Block(context.Background(), sc, capacity.Block{Reason: capacity.Cooldown, Until: t0.Add(3 * time.Second)}))
		}, paused: 3 * time.Second},
		{name: "open breaker pauses", setup: func(t *testing.T, s *capacity.MemoryStore) {
			require.NoError(t, s.Block(context.Background(), sc, capacity.Block{Reason: capacity.Overloaded, Until: t0.Add(15 * time.Second), HalfOpen: time.Second}))
		}, paused: 15 * time.Second},
		{name: "refused credential is out on every scope of it", setup: func(t *testing.T, s *capacity.MemoryStore) {
			require.NoError(t, s.Block(context.Background(), other, capacity.Block{Reason: capacity.CredentialDisabled, Credential: true,
				Until: t0.Add(time.Minute), HalfOpen: 30 * time.Second, Detail: "invalid_api_key"}))
		}, out: capacity.CredentialDisabled},
		{name: "exhausted quota is out", setup: func(t *testing.T, s *capacity.MemoryStore) {
			require.NoError(t, s.Block(context.Background(), sc, capacity.Block{Reason: capacity.QuotaExhausted, Until: t0.Add(time.Hour), Detail: "insufficient_quota"}))
		}, out: capacity.QuotaExhausted},
		{name: "a quota and a cooldown: out", setup: func(t *testing.T, s *capacity.MemoryStore) {
			require.NoError(t, s.Block(context.Background(), other, capacity.Block{Reason: capacity.QuotaExhausted, Credential: true, Until: t0.Add(time.Hour)}))
			require.NoError(t, s.Block(context.Background(), sc, capacity.Block{Reason: capacity.Cooldown, Until: t0.Add(2 * time.Second)}))
		}, out: capacity.QuotaExhausted, paused: 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: capacitytest.NewManualClock(t0)})
			tc.setup(t, s)
			snap, err := s.Snapshot(context.Background(), sc)
			require.NoError(t, err)
			b, out := snap.OutBlock()
			assert.Equal(t, tc.out != 0, out, "out")
			assert.Equal(t, tc.out, b.Reason)
			assert.Equal(t, tc.paused, snap.Paused())
			assert.InDelta(t, tc.used, snap.Used(), 1e-9)
		})
	}
}

// TestSnapshotPoolStateProbe: a refused credential whose half-open probe is
// out is paused until the probe's verdict, not out; a block that ended is
// neither.
func TestSnapshotPoolStateProbe(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	clock := capacitytest.NewManualClock(t0)
	s := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "key-1"}
	ctx := context.Background()
	require.NoError(t, s.Block(ctx, sc, capacity.Block{Reason: capacity.CredentialDisabled, Credential: true, Until: t0.Add(time.Minute), HalfOpen: 30 * time.Second}))
	clock.Advance(time.Minute)
	snap, err := s.Snapshot(ctx, sc)
	require.NoError(t, err)
	_, out := snap.OutBlock()
	assert.False(t, out, "the block ran out: its probe is due")
	assert.Zero(t, snap.Paused())

	var c capacity.Charges
	c[capacity.Requests] = 1
	r, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: capacity.Limits{RequestsPerMinute: 60}, Call: "probe", Attempt: 1, Charges: c})
	require.NoError(t, err)
	require.True(t, r.Probe)
	snap, err = s.Snapshot(ctx, sc)
	require.NoError(t, err)
	_, out = snap.OutBlock()
	assert.False(t, out, "a probe is testing the credential")
	assert.Equal(t, 30*time.Second, snap.Paused())
}

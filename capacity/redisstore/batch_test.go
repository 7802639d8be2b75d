package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

// TestBatchMixedLimits: reserves with different limits in one batch are
// each decided under their own (the batch sends the first one's signature
// once, and the others their own), and a settle in between is applied.
func TestBatchMixedLimits(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t, Options{Engine: EngineScripts})
	ctx := context.Background()
	k := s.keysFor(keysScope)
	// The tight limits meter output tokens (~8 at once), which the roomy
	// ones leave unlimited: switching back loses nothing.
	roomy := capacity.Limits{RequestsPerMinute: 600, TokensPerMinute: 1e6}
	tight := capacity.Limits{RequestsPerMinute: 600, TokensPerMinute: 1e6, OutputTokensPerMinute: 100}
	charges := capacity.Charges{capacity.Requests: 1, capacity.OutputTokens: 1000, capacity.Tokens: 1000, capacity.InFlight: 1}
	first := capacity.Request{Scope: keysScope, Limits: roomy, Call: "a", Attempt: 1, Charges: charges, TTL: time.Minute}
	res, err := s.Reserve(ctx, first)
	require.NoError(t, err)
	require.True(t, res.Granted)

	reqs := []capacity.Request{
		{Scope: keysScope, Limits: roomy, Call: "b", Attempt: 1, Charges: charges, TTL: time.Minute},
		{Scope: keysScope, Limits: tight, Call: "c", Attempt: 1, Charges: charges, TTL: time.Minute},
		{Scope: keysScope, Limits: roomy, Call: "d", Attempt: 1, Charges: charges, TTL: time.Minute},
	}
	ops := []*op{
		s.reserveOp(ctx, k, reqs[0]),
		s.reserveOp(ctx, k, reqs[1]),
		s.settleOp(ctx, k, res.Lease, res.Lease.Charges),
		s.reserveOp(ctx, k, reqs[2]),
	}
	runOps(s, k, ops)

	got, _, err := parseReserve(ops[0].res, ops[0].h, reqs[0])
	require.NoError(t, err)
	require.True(t, got.Granted, "the batch's own limits")
	_, _, err = parseReserve(ops[1].res, ops[1].h, reqs[1])
	var tooLarge *capacity.DemandTooLargeError
	require.ErrorAs(t, err, &tooLarge, "decided under its own, tighter limits")
	require.Equal(t, "ok", ops[2].res.str())
	got, _, err = parseReserve(ops[3].res, ops[3].h, reqs[2])
	require.NoError(t, err)
	require.True(t, got.Granted, "the batch's limits again")

	snap, err := s.Snapshot(ctx, keysScope)
	require.NoError(t, err)
	calls := map[string]bool{}
	for _, le := range snap.Leases {
		calls[le.Call] = true
	}
	require.Equal(t, map[string]bool{"b": true, "d": true}, calls, "a settled, b and d granted, c refused")
}

// runOps runs ops as one batch of k's scope, as the batcher would send
// them together, and returns once each has its result.
func runOps(s *Store, k *scopeKeys, ops []*op) {
	for _, o := range ops {
		o.done = make(chan struct{})
	}
	k.batch.mu.Lock()
	k.batch.running++
	k.batch.mu.Unlock()
	s.runBatch(k, ops)
}

// TestBatchMarks: Go follows the grant history through a batch (a fresh
// grant's result carries no mark): each grant's mark is the one the script
// stored with its lease, after a settle's debt and a ticket booked earlier
// in the same batch.
func TestBatchMarks(t *testing.T) {
	t.Parallel()
	m := newMarksScope(t)
	s, k, limits, small, first, ctx := m.s, m.k, m.limits, m.small, m.first, context.Background()
	tokenCap := int64(limits.Budgets()[capacity.Tokens].Capacity)
	debt := small
	debt[capacity.Tokens] = 50 // used more than reserved

	reqs := []capacity.Request{
		{Scope: keysScope, Limits: limits, Call: "a", Attempt: 1, Charges: small, TTL: time.Minute},
		{Scope: keysScope, Limits: limits, Call: "c", Attempt: 1, Book: true, TTL: time.Minute,
			Charges: capacity.Charges{capacity.Requests: 1, capacity.Tokens: tokenCap - 5, capacity.InFlight: 1}},
		{Scope: keysScope, Limits: limits, Call: "d", Attempt: 1, TTL: time.Minute,
			Charges: capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}},
	}
	ops := []*op{
		s.reserveOp(ctx, k, reqs[0]),
		s.settleOp(ctx, k, first.Lease, debt),
		s.reserveOp(ctx, k, reqs[1]),
		s.reserveOp(ctx, k, reqs[2]),
	}
	runOps(s, k, ops)

	a, _, err := parseReserve(ops[0].res, ops[0].h, reqs[0])
	require.NoError(t, err)
	require.True(t, a.Granted)
	c, _, err := parseReserve(ops[2].res, ops[2].h, reqs[1])
	require.NoError(t, err)
	require.False(t, c.Granted)
	require.True(t, c.Booked, "the large call books a ticket")
	d, _, err := parseReserve(ops[3].res, ops[3].h, reqs[2])
	require.NoError(t, err)
	require.True(t, d.Granted)

	snap, err := s.Snapshot(ctx, keysScope)
	require.NoError(t, err)
	stored := map[string]capacity.Mark{}
	for _, le := range snap.Leases {
		stored[le.Call] = le.Mark
	}
	require.Equal(t, stored["a"], a.Lease.Mark)
	require.Equal(t, stored["d"], d.Lease.Mark)
	want := first.Lease.Mark.Granted
	// A booking is not dispatched: c's ticket counts when it is claimed.
	for _, ch := range []capacity.Charges{small, {capacity.Tokens: 40}, reqs[2].Charges} {
		for dim, x := range ch {
			want[dim] += float64(x)
		}
	}
	require.Equal(t, want, d.Lease.Mark.Granted, "a's grant, x's debt and d's grant")
}

// TestBatchMarksStateGone: a settle on a scope whose state is gone applies
// nothing, so a grant after it in the same batch (which starts the scope
// anew) has the mark the script stored, without the settle's debt.
func TestBatchMarksStateGone(t *testing.T) {
	t.Parallel()
	m := newMarksScope(t)
	s, k, limits, small, first, ctx := m.s, m.k, m.limits, m.small, m.first, context.Background()
	require.NoError(t, m.rdb.Del(ctx, k.keys[keyState]).Err()) // evicted, say
	debt := small
	debt[capacity.Tokens] = 50

	req := capacity.Request{Scope: keysScope, Limits: limits, Call: "a", Attempt: 1, Charges: small, TTL: time.Minute}
	ops := []*op{s.settleOp(ctx, k, first.Lease, debt), s.reserveOp(ctx, k, req)}
	runOps(s, k, ops)
	require.NoError(t, ops[0].err)
	a, _, err := parseReserve(ops[1].res, ops[1].h, req)
	require.NoError(t, err)
	require.True(t, a.Granted)

	snap, err := s.Snapshot(ctx, keysScope)
	require.NoError(t, err)
	require.Len(t, snap.Leases, 1)
	require.Equal(t, snap.Leases[0].Mark, a.Lease.Mark)
}

// marksScope is where the marks tests start: a store, limits with room,
// and one call "x" granted with charges small.
type marksScope struct {
	s      *Store
	rdb    *redis.Client
	k      *scopeKeys
	limits capacity.Limits
	small  capacity.Charges
	first  capacity.Reservation
}

func newMarksScope(t *testing.T) marksScope {
	t.Helper()
	s, rdb := newTestStore(t, Options{Engine: EngineScripts})
	m := marksScope{
		s: s, rdb: rdb, k: s.keysFor(keysScope),
		limits: capacity.Limits{RequestsPerMinute: 600, TokensPerMinute: 6000, MaxInFlight: 100},
		small:  capacity.Charges{capacity.Requests: 1, capacity.Tokens: 10, capacity.InFlight: 1},
	}
	var err error
	m.first, err = s.Reserve(context.Background(), capacity.Request{Scope: keysScope, Limits: m.limits, Call: "x", Attempt: 1, Charges: m.small, TTL: time.Minute})
	require.NoError(t, err)
	require.True(t, m.first.Granted)
	return m
}

// TestBatchObserveCreatesState: an observe creates a scope's state, as
// MemoryStore.Observe does, so a settle after it in the same batch applies
// (its debt is charged) rather than finding the state gone.
func TestBatchObserveCreatesState(t *testing.T) {
	t.Parallel()
	m := newMarksScope(t)
	s, k, small, first, ctx := m.s, m.k, m.small, m.first, context.Background()
	require.NoError(t, m.rdb.Del(ctx, k.keys[keyState]).Err()) // evicted, say
	debt := small
	debt[capacity.Tokens] = 50
	ops := []*op{s.observeOp(ctx, k, capacity.Observation{}), s.settleOp(ctx, k, first.Lease, debt)}
	runOps(s, k, ops)
	require.NoError(t, ops[0].err)
	require.Equal(t, "ok", ops[0].res.str())
	require.Equal(t, "ok", ops[1].res.str(), "the observe made the state the settle applies to")
}

// TestBatchTakesReleasesTogether: pending releases go in one batch of up
// to maxReleaseBatch, sharing one retime; any other operation keeps
// batches to maxBatch, with up to maxBatchReserves reserves, and a release
// batch stops at the first other one.
func TestBatchTakesReleasesTogether(t *testing.T) {
	ops := func(codes ...int) []*op {
		var out []*op
		for _, c := range codes {
			out = append(out, &op{code: c})
		}
		return out
	}
	repeat := func(code, n int) []int {
		c := make([]int, n)
		for i := range c {
			c[i] = code
		}
		return c
	}
	for _, tt := range []struct {
		name    string
		pending []int
		want    int
	}{
		{"releases alone", repeat(opRelease, 600), maxReleaseBatch},
		{"fewer releases than a batch", repeat(opRelease, 10), 10},
		{"releases, then a reserve", append(repeat(opRelease, maxReleaseBatch-10), opReserve), maxReleaseBatch - 10}, // more than maxBatch
		{"a few releases and reserves", append(repeat(opRelease, 5), repeat(opReserve, 40)...), 5 + maxBatchReserves},
		{"reserves", repeat(opReserve, 100), maxBatchReserves},
		{"settles", repeat(opSettle, 100), maxBatch},
		{"reserves and settles", append(repeat(opReserve, 10), repeat(opSettle, 100)...), maxBatch},
		{"settles, then reserves", append(repeat(opSettle, 10), repeat(opReserve, 100)...), 10 + maxBatchReserves},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := &batcher{pending: ops(tt.pending...)}
			got := b.take()
			require.Len(t, got, tt.want)
			require.Len(t, b.pending, len(tt.pending)-tt.want)
			require.Equal(t, tt.want, b.sent)
		})
	}
}

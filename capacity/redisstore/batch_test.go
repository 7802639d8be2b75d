package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

// TestBatchMixedLimits: reserves with different limits in one batch are
// each decided under their own (the batch sends the first one's signature
// once, and the others their own), and a settle in between is applied.
func TestBatchMixedLimits(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t, Options{})
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

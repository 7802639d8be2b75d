package interceptor

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/accounting"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/capacity/learn"
)

// learnedOf returns what n calls of output out (and input ratio ratio, if
// positive) teach.
func learnedOf(t *testing.T, n int, out, ratio float64) learn.Learned {
	t.Helper()
	var l learn.Learned
	for range n {
		require.NoError(t, l.Output.Add(out))
		if ratio > 0 {
			require.NoError(t, l.InputRatio.Add(ratio))
		}
	}
	return l
}

func TestLearnedDemand(t *testing.T) {
	opts, err := LearnOptions{}.withDefaults()
	require.NoError(t, err)
	base := capacity.Demand{InputTokens: 1000, MaxTokens: 8192}
	estimated := base
	estimated.InputEstimated = true
	expected := base
	expected.OutputTokens = 700
	for _, tc := range []struct {
		name     string
		d        capacity.Demand
		l        learn.Learned
		settles  bool
		wantIn   int64
		wantOut  int64 // Demand.OutputTokens: 0 reserves max_tokens
		wantSame bool
	}{
		{"nothing learned", base, learn.Learned{}, true, 1000, 0, true},
		{"too few samples", base, learnedOf(t, 19, 400, 0), true, 1000, 0, true},
		{"output learned", base, learnedOf(t, 20, 400, 0), true, 1000, 431, false}, // 400's bucket edge
		{"never above max_tokens", capacity.Demand{InputTokens: 1000, MaxTokens: 300}, learnedOf(t, 50, 400, 0), true, 1000, 300, false},
		{"openai: max_tokens is charged", base, learnedOf(t, 50, 400, 0), false, 1000, 0, true},
		{"the caller's expectation wins", expected, learnedOf(t, 50, 400, 0), true, 1000, 700, true},
		{"an exact input is kept", base, learnedOf(t, 50, 400, 1.5), false, 1000, 0, true},
		{"an estimate is calibrated", estimated, learnedOf(t, 50, 400, 1.5), false, 1543, 0, false}, // 1.5's bucket edge, 2^(5/8)
		{"a wild ratio is bounded", estimated, learnedOf(t, 50, 400, 40), false, 2000, 0, false},
		{"a zero output reserves one token", base, learnedOf(t, 50, 0, 0), true, 1000, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := learnedDemand(tc.d, tc.l, opts, tc.settles)
			assert.Equal(t, tc.wantIn, got.InputTokens)
			assert.Equal(t, tc.wantOut, got.OutputTokens)
			if tc.wantSame {
				assert.Equal(t, tc.d, got)
			}
			assert.Equal(t, tc.d.MaxTokens, got.MaxTokens, "max_tokens is what the request sends")
		})
	}
}

// countingLearner counts reads of a memory store's learning.
type countingLearner struct {
	*capacity.MemoryStore
	reads atomic.Int64
	fail  atomic.Bool
}

func (c *countingLearner) Learned(ctx context.Context, sc capacity.Scope, kind string) (learn.Learned, error) {
	c.reads.Add(1)
	if c.fail.Load() {
		return learn.Learned{}, capacity.ErrStoreUnavailable
	}
	return c.MemoryStore.Learned(ctx, sc, kind)
}

// A worker reads what a (scope, kind) learned at most once per Refresh, and
// keeps what it had when a read fails.
func TestLearnedIsCachedPerRefresh(t *testing.T) {
	clock := capacitytest.NewManualClock(time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC))
	store := &countingLearner{MemoryStore: capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})}
	o, err := Options{Store: store, Limits: func(capacity.Scope) (capacity.Limits, bool) { return capacity.Limits{}, true },
		Clock: clock, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))}.withDefaults()
	require.NoError(t, err)
	l := newLearning(o)
	g := &gatedCall{opts: &o, scope: capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "m", Credential: "a"}, kind: "k",
		profile: accounting.AnthropicProfile{}, call: Call{Demand: capacity.Demand{MaxTokens: 8192}}}
	for range 25 {
		require.NoError(t, store.Learn(context.Background(), g.scope, "k", learn.Sample{OutputTokens: 128, MaxTokens: 8192}))
	}
	ctx := context.Background()
	assert.Equal(t, int64(128), l.demand(ctx, g).OutputTokens)
	assert.Equal(t, int64(128), l.demand(ctx, g).OutputTokens)
	assert.Equal(t, int64(1), store.reads.Load(), "one read within Refresh")
	clock.Advance(DefaultLearnRefresh)
	store.fail.Store(true)
	assert.Equal(t, int64(128), l.demand(ctx, g).OutputTokens, "a failed read keeps what the worker had")
	assert.Equal(t, int64(128), l.demand(ctx, g).OutputTokens)
	assert.Equal(t, int64(2), store.reads.Load(), "and is not tried again before Refresh")
	g.call.Demand = capacity.Demand{InputTokens: 10, MaxTokens: 8192, OutputTokens: 50}
	clock.Advance(DefaultLearnRefresh)
	assert.Equal(t, int64(50), l.demand(ctx, g).OutputTokens)
	assert.Equal(t, int64(2), store.reads.Load(), "a call with nothing to learn reads nothing")
}

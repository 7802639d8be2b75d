package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/capacity/learn"
)

// LearnerFactory returns a new, empty store that implements
// capacity.Learner, whose time is clock.Now, sharing no state with earlier
// ones.
type LearnerFactory func(t *testing.T, clock capacity.Clock) capacity.Learner

// RunLearner runs the capacity.Learner contract against the stores
// newStore makes.
func RunLearner(t *testing.T, newStore LearnerFactory) {
	for _, tc := range learnCases {
		t.Run(tc.name, func(t *testing.T) {
			clock := capacitytest.NewManualClock(Epoch)
			tc.run(t, clock, newStore(t, clock))
		})
	}
}

var learnCases = []struct {
	name string
	run  func(t *testing.T, clock *capacitytest.ManualClock, l capacity.Learner)
}{
	{"nothing learned reads empty", learnEmpty},
	{"output, input and max_tokens per kind", learnPerKind},
	{"input ratio per scope, only from estimates", learnInputRatio},
	{"halving past the cap follows a change", learnDecay},
	{"forgotten after Memory", learnForgotten},
	{"bad kinds, samples and scopes are refused", learnRefuses},
	{"concurrent samples each count once", learnConcurrent},
}

var learnScope = capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "claude-sonnet-4-5", Credential: "team-a"}

func mustLearn(t *testing.T, l capacity.Learner, sc capacity.Scope, kind string, s learn.Sample) {
	t.Helper()
	require.NoError(t, l.Learn(context.Background(), sc, kind, s))
}

func mustLearned(t *testing.T, l capacity.Learner, sc capacity.Scope, kind string) learn.Learned {
	t.Helper()
	got, err := l.Learned(context.Background(), sc, kind)
	require.NoError(t, err)
	return got
}

func quantile(t *testing.T, h learn.Histogram, q float64) float64 {
	t.Helper()
	v, ok := h.Quantile(q)
	require.True(t, ok, "quantile %v of an empty histogram", q)
	return v
}

func learnEmpty(t *testing.T, _ *capacitytest.ManualClock, l capacity.Learner) {
	got := mustLearned(t, l, learnScope, "Messages")
	assert.Zero(t, got.Calls())
	assert.Zero(t, got.InputRatio.Count())
	assert.True(t, got.Updated.IsZero())
	kinds, err := l.LearnedKinds(context.Background(), learnScope)
	require.NoError(t, err)
	assert.Empty(t, kinds)
}

func learnPerKind(t *testing.T, clock *capacitytest.ManualClock, l capacity.Learner) {
	for i := int64(1); i <= 100; i++ {
		mustLearn(t, l, learnScope, "summarize", learn.Sample{OutputTokens: i * 10, MaxTokens: 8192, InputTokens: 1000})
	}
	mustLearn(t, l, learnScope, "classify", learn.Sample{OutputTokens: 3, MaxTokens: 16, InputTokens: 200})
	other := learnScope
	other.Credential = "team-b"
	mustLearn(t, l, other, "translate", learn.Sample{OutputTokens: 7, MaxTokens: 64})

	got := mustLearned(t, l, learnScope, "summarize")
	assert.InDelta(t, 100, got.Calls(), 1e-9)
	assert.InDelta(t, 100, got.Input.Count(), 1e-9)
	assert.InDelta(t, 100, got.MaxTokens.Count(), 1e-9)
	// p95 is the 95th value, 950, up to a bucket's width above.
	p95 := quantile(t, got.Output, 0.95)
	assert.GreaterOrEqual(t, p95, 950.0)
	assert.Less(t, p95, 950*1.1)
	assert.InDelta(t, 505, got.Output.Mean(), 1e-6)
	assert.InDelta(t, 8192, got.MaxTokens.Mean(), 1e-6)
	assert.InDelta(t, 1000, got.Input.Mean(), 1e-6)
	assert.Equal(t, clock.Now().UnixMilli(), got.Updated.UnixMilli())
	assert.Zero(t, got.InputRatio.Count(), "no sample had an estimate")

	assert.InDelta(t, 3, quantile(t, mustLearned(t, l, learnScope, "classify").Output, 1), 3*0.1)
	assert.Zero(t, mustLearned(t, l, learnScope, "translate").Calls(), "kinds are per scope")
	kinds, err := l.LearnedKinds(context.Background(), learnScope)
	require.NoError(t, err)
	assert.Equal(t, []string{"classify", "summarize"}, kinds)
	kinds, err = l.LearnedKinds(context.Background(), other)
	require.NoError(t, err)
	assert.Equal(t, []string{"translate"}, kinds)
}

func learnInputRatio(t *testing.T, _ *capacitytest.ManualClock, l capacity.Learner) {
	for i := range 40 {
		mustLearn(t, l, learnScope, "a", learn.Sample{OutputTokens: 10, InputTokens: 1200, InputEstimate: 1000}) // 1.2
		if i%2 == 0 {
			mustLearn(t, l, learnScope, "b", learn.Sample{OutputTokens: 10, InputTokens: 800, InputEstimate: 1000}) // 0.8
		}
		mustLearn(t, l, learnScope, "b", learn.Sample{OutputTokens: 10, InputTokens: 5000}) // exact input: no ratio
	}
	for _, kind := range []string{"a", "b", "c"} {
		got := mustLearned(t, l, learnScope, kind)
		assert.InDelta(t, 60, got.InputRatio.Count(), 1e-9, "%s sees the scope's ratio", kind)
		assert.InDelta(t, (40*1.2+20*0.8)/60, got.InputRatio.Mean(), 1e-9)
		assert.InDelta(t, 1.2, quantile(t, got.InputRatio, 0.95), 1.2*0.1)
		assert.InDelta(t, 0.8, quantile(t, got.InputRatio, 0.2), 0.8*0.1)
	}
	other := learnScope
	other.LimitGroup = "claude-haiku-4-5"
	assert.Zero(t, mustLearned(t, l, other, "a").InputRatio.Count(), "ratios are per scope")
}

func learnDecay(t *testing.T, _ *capacitytest.ManualClock, l capacity.Learner) {
	for range learn.DefaultCap {
		mustLearn(t, l, learnScope, "k", learn.Sample{OutputTokens: 100, MaxTokens: 4096})
	}
	got := mustLearned(t, l, learnScope, "k")
	assert.InDelta(t, learn.DefaultCap, got.Calls(), 1e-9, "at the cap: not halved yet")
	mustLearn(t, l, learnScope, "k", learn.Sample{OutputTokens: 100, MaxTokens: 4096})
	got = mustLearned(t, l, learnScope, "k")
	assert.InDelta(t, (learn.DefaultCap+1)/2.0, got.Calls(), 1e-9, "past the cap: halved")
	assert.InDelta(t, got.Calls(), got.MaxTokens.Count(), 1e-9, "every histogram of the kind halves together")
	assert.InDelta(t, 4096, got.MaxTokens.Mean(), 1e-6, "sums halve with counts")
	// The distribution changes: within a cap's worth of samples the median
	// follows it (another halving comes after half a cap).
	for range learn.DefaultCap/2 + 100 {
		mustLearn(t, l, learnScope, "k", learn.Sample{OutputTokens: 1000, MaxTokens: 4096})
	}
	got = mustLearned(t, l, learnScope, "k")
	assert.LessOrEqual(t, got.Calls(), float64(learn.DefaultCap))
	assert.InDelta(t, 1000, quantile(t, got.Output, 0.5), 1000*0.1)
	assert.InDelta(t, 100, quantile(t, got.Output, 0.2), 100*0.1, "the old samples still weigh")
}

func learnForgotten(t *testing.T, clock *capacitytest.ManualClock, l capacity.Learner) {
	mustLearn(t, l, learnScope, "k", learn.Sample{OutputTokens: 100, InputTokens: 10, InputEstimate: 10})
	clock.Advance(learn.Memory - time.Second)
	assert.InDelta(t, 1, mustLearned(t, l, learnScope, "k").Calls(), 1e-9, "kept within learn.Memory")
	clock.Advance(2 * time.Second)
	got := mustLearned(t, l, learnScope, "k")
	assert.Zero(t, got.Calls(), "forgotten past learn.Memory")
	assert.Zero(t, got.InputRatio.Count())
	kinds, err := l.LearnedKinds(context.Background(), learnScope)
	require.NoError(t, err)
	assert.Empty(t, kinds)
	mustLearn(t, l, learnScope, "k", learn.Sample{OutputTokens: 7})
	got = mustLearned(t, l, learnScope, "k")
	assert.InDelta(t, 1, got.Calls(), 1e-9, "learning starts over")
	assert.InDelta(t, 7, got.Output.Mean(), 1e-9)
}

func learnRefuses(t *testing.T, _ *capacitytest.ManualClock, l capacity.Learner) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		scope capacity.Scope
		kind  string
		s     learn.Sample
		want  error
	}{
		{"empty kind", learnScope, "", learn.Sample{}, capacity.ErrInvalidKind},
		{"prompt text", learnScope, "Summarize this contract for me", learn.Sample{}, capacity.ErrInvalidKind},
		{"key-shaped", learnScope, "sk-proj-4fQ9xZ2mB7kL1pW8rT3vY6nH0jD5sA", learn.Sample{}, capacity.ErrInvalidKind},
		{"a colon", learnScope, "a:b", learn.Sample{}, capacity.ErrInvalidKind},
		{"negative output", learnScope, "k", learn.Sample{OutputTokens: -1}, learn.ErrBadSample},
		{"negative estimate", learnScope, "k", learn.Sample{InputEstimate: -1}, learn.ErrBadSample},
		{"no credential", capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "x"}, "k", learn.Sample{}, capacity.ErrInvalidScope},
	} {
		assert.ErrorIs(t, l.Learn(ctx, tc.scope, tc.kind, tc.s), tc.want, tc.name)
	}
	_, err := l.Learned(ctx, learnScope, "Summarize this")
	assert.ErrorIs(t, err, capacity.ErrInvalidKind)
	_, err = l.LearnedKinds(ctx, capacity.Scope{})
	assert.ErrorIs(t, err, capacity.ErrInvalidScope)
	kinds, err := l.LearnedKinds(ctx, learnScope)
	require.NoError(t, err)
	assert.Empty(t, kinds, "nothing refused was learned")
}

func learnConcurrent(t *testing.T, _ *capacitytest.ManualClock, l capacity.Learner) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				assert.NoError(t, l.Learn(context.Background(), learnScope, "k", learn.Sample{OutputTokens: 50, InputTokens: 60, InputEstimate: 50}))
			}
		})
	}
	wg.Wait()
	got := mustLearned(t, l, learnScope, "k")
	assert.InDelta(t, 200, got.Calls(), 1e-9)
	assert.InDelta(t, 200, got.InputRatio.Count(), 1e-9)
	assert.InDelta(t, 50*200, got.Output.Sum(), 1e-6)
}

package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/learn"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
)

// TestLearnerContract runs the capacity.Learner contract against a real
// redis-server, on the suite's manual clock.
func TestLearnerContract(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	storetest.RunLearner(t, func(t *testing.T, clock capacity.Clock) capacity.Learner {
		s, err := New(rdb, Options{Engine: EngineScripts, Prefix: testPrefix(t, rdb), Clock: clock})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// What is learned lives in the scope's hash tag, under names (never
// prompts), with a TTL, and is listed by LearnedScopes.
func TestLearnedKeys(t *testing.T) {
	t.Parallel()
	s, rdb := newTestStore(t, Options{Engine: EngineScripts})
	ctx := context.Background()
	sc := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "claude-sonnet-4-5", Credential: "team-a", Region: "eu"}
	began, redisBefore := time.Now(), redisNow(t, rdb)
	require.NoError(t, s.Learn(ctx, sc, "Messages", learn.Sample{OutputTokens: 410, MaxTokens: 8192, InputTokens: 1200, InputEstimate: 1000}))

	tag := "{" + s.opts.Prefix + ":anthropic/team-a}"
	keys, err := rdb.Keys(ctx, "{"+s.opts.Prefix+":*").Result()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{
		tag + ":learn:anthropic/claude-sonnet-4-5/team-a/eu:Messages",
		tag + ":learnin:anthropic/claude-sonnet-4-5/team-a/eu",
		tag + ":learnkinds:anthropic/claude-sonnet-4-5/team-a/eu",
	}, keys)
	for _, k := range keys {
		ttl, err := rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		requireTTL(t, learn.Memory, ttl, time.Since(began), "%s: TTL %v", k, ttl)
	}
	fields, err := rdb.HGetAll(ctx, tag+":learn:anthropic/claude-sonnet-4-5/team-a/eu:Messages").Result()
	require.NoError(t, err)
	require.Equal(t, "1", fields["out.n"])
	require.Equal(t, "410", fields["out.s"])
	scopes, err := s.LearnedScopes(ctx)
	require.NoError(t, err)
	require.Equal(t, []capacity.Scope{sc}, scopes)
	got, err := s.Learned(ctx, sc, "Messages")
	require.NoError(t, err)
	// Redis time, between two readings of it around the sample.
	redisAfter := redisNow(t, rdb)
	require.False(t, got.Updated.Before(redisBefore.Truncate(time.Millisecond)), "updated %v, before the sample (%v)", got.Updated, redisBefore)
	require.False(t, got.Updated.After(redisAfter), "updated %v, after the read (%v)", got.Updated, redisAfter)
	p, _ := got.InputRatio.Quantile(0.5)
	require.InDelta(t, 1.2, p, 0.12)
}

// A hash that holds what this version cannot read is an error, never a
// guess; fields of a later format are ignored.
func TestParseLearned(t *testing.T) {
	now := time.UnixMicro(1_760_000_000_000_000)
	tNow := "1760000000000000"
	for _, tc := range []struct {
		name      string
		kind      map[string]string
		ratio     map[string]string
		wantErr   bool
		wantCalls float64
		wantRatio float64
	}{
		{"empty", nil, nil, false, 0, 0},
		{"one sample", map[string]string{"t": tNow, "out.n": "1", "out.s": "410", "out.70": "1", "in.0": "1", "max.104": "1"}, nil, false, 1, 0},
		{"halved counts", map[string]string{"t": tNow, "out.70": "0.5", "out.71": "1.25"}, map[string]string{"t": tNow, "ratio.2": "3.5"}, false, 1.75, 3.5},
		{"a later field", map[string]string{"t": tNow, "out.70": "1", "out.p99": "12", "zz": "x"}, nil, false, 1, 0},
		{"forgotten", map[string]string{"t": "1000", "out.70": "1"}, map[string]string{"t": "1000", "ratio.2": "1"}, false, 0, 0},
		{"bad time", map[string]string{"t": "soon", "out.70": "1"}, nil, true, 0, 0},
		{"bad count", map[string]string{"t": tNow, "out.70": "many"}, nil, true, 0, 0},
		{"negative count", map[string]string{"t": tNow, "out.70": "-1"}, nil, true, 0, 0},
		{"infinite sum", map[string]string{"t": tNow, "out.s": "inf"}, nil, true, 0, 0},
		{"bucket out of range", map[string]string{"t": tNow, "out.100000": "1"}, nil, true, 0, 0},
		{"bad ratio", nil, map[string]string{"t": tNow, "ratio.1": "nan"}, true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := parseLearned(tc.kind, tc.ratio, now)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.InDelta(t, tc.wantCalls, l.Calls(), 1e-9)
			require.InDelta(t, tc.wantRatio, l.InputRatio.Count(), 1e-9)
		})
	}
}

// BenchmarkLearn is one settled call's sample: one script round trip.
func BenchmarkLearn(b *testing.B) {
	s, _ := newTestStore(b, Options{Engine: EngineScripts})
	ctx := context.Background()
	sc := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "claude-sonnet-4-5", Credential: "team-a"}
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		i++
		if err := s.Learn(ctx, sc, "Messages", learn.Sample{OutputTokens: 100 + i%900, MaxTokens: 8192, InputTokens: 1200, InputEstimate: 1000}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLearned is a worker's read of a (scope, kind), at most once per
// Learning.Refresh: two HGETALLs in one pipeline.
func BenchmarkLearned(b *testing.B) {
	s, _ := newTestStore(b, Options{Engine: EngineScripts})
	ctx := context.Background()
	sc := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "claude-sonnet-4-5", Credential: "team-a"}
	for i := range int64(2000) {
		if err := s.Learn(ctx, sc, "Messages", learn.Sample{OutputTokens: 100 + i%900, MaxTokens: 8192, InputTokens: 1200, InputEstimate: 1000}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Learned(ctx, sc, "Messages"); err != nil {
			b.Fatal(err)
		}
	}
}

package learn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/learn"
)

// histogramOf returns a histogram of vs.
func histogramOf(t *testing.T, vs ...float64) learn.Histogram {
	t.Helper()
	var h learn.Histogram
	for _, v := range vs {
		require.NoError(t, h.Add(v))
	}
	return h
}

// seq returns 1, 2, ..., n.
func seq(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(i + 1)
	}
	return out
}

func TestHistogramQuantiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		vs   []float64
		q    float64
		want float64 // the true quantile: the answer is at most a bucket above
	}{
		{"one value", []float64{410}, 0.5, 410},
		{"p50 of 1..1000", seq(1000), 0.5, 500},
		{"p95 of 1..1000", seq(1000), 0.95, 950},
		{"p99.9 of 1..1000", seq(1000), 0.999, 999},
		{"p0 is the least", seq(1000), 0, 1},
		{"p100 is the most", seq(1000), 1, 1000},
		{"power of two is exact", []float64{8192}, 1, 8192},
		{"ratios below one", []float64{0.3, 0.4, 0.5}, 1, 0.5},
		{"zero", []float64{0, 0, 0}, 0.5, 0},
		{"a tail", append(repeat(100, 990), repeat(5000, 10)...), 0.995, 5000},
		{"the tail does not move the median", append(repeat(100, 990), repeat(5000, 10)...), 0.5, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := histogramOf(t, tc.vs...)
			got, ok := h.Quantile(tc.q)
			require.True(t, ok)
			assert.GreaterOrEqual(t, got, tc.want, "never below the true quantile")
			assert.LessOrEqual(t, got, max(tc.want*math.Exp2(1.0/8), math.Exp2(-16)), "less than a bucket above")
		})
	}
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestHistogramCountSumMean(t *testing.T) {
	h := histogramOf(t, 10, 20, 30)
	assert.InDelta(t, 3, h.Count(), 0)
	assert.InDelta(t, 60, h.Sum(), 0)
	assert.InDelta(t, 20, h.Mean(), 0)
	var empty learn.Histogram
	assert.Zero(t, empty.Mean())
	_, ok := empty.Quantile(0.5)
	assert.False(t, ok, "no quantile of nothing")
}

func TestHistogramDecay(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cap       float64
		adds      int
		wantCount float64
	}{
		{"below the cap", 10, 10, 10},
		{"past the cap halves", 10, 11, 5.5},
		{"halves again", 10, 16, (5.5 + 5) / 2}, // the 16th add makes 10.5
		{"default cap", 0, learn.DefaultCap + 1, (learn.DefaultCap + 1) / 2.0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := learn.Histogram{Cap: tc.cap}
			for range tc.adds {
				require.NoError(t, h.Add(7))
			}
			assert.InDelta(t, tc.wantCount, h.Count(), 1e-9)
			assert.InDelta(t, 7*tc.wantCount, h.Sum(), 1e-9, "the sum halves with the count")
		})
	}
}

func TestHistogramFollowsAChange(t *testing.T) {
	h := learn.Histogram{Cap: 100}
	for range 100 {
		require.NoError(t, h.Add(1000))
	}
	for range 100 {
		require.NoError(t, h.Add(10))
	}
	p50, _ := h.Quantile(0.5)
	assert.Less(t, p50, 11.0, "after a cap's worth the median has moved")
	p95, _ := h.Quantile(0.95)
	assert.Greater(t, p95, 1000.0, "the old long outputs still weigh in the tail")
	for range 200 {
		require.NoError(t, h.Add(10))
	}
	p95, _ = h.Quantile(0.95)
	assert.Less(t, p95, 11.0, "after three caps they have decayed out of the p95")
}

func TestHistogramHalvingForgetsOldBuckets(t *testing.T) {
	h := histogramOf(t, 5000)
	for range 6 {
		h.Halve()
	}
	assert.Empty(t, h.Buckets(), "a sample halved six times is gone")
	assert.Zero(t, h.Count())
}

func TestHistogramBounds(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want int
	}{
		{0, learn.MinBucket},
		{math.SmallestNonzeroFloat64, learn.MinBucket},
		{1, 0},
		{2, 8},
		{2.0000001, 9},
		{1e300, learn.MaxBucket},
		{math.MaxFloat64, learn.MaxBucket},
	} {
		got, err := learn.BucketOf(tc.v)
		require.NoError(t, err, tc.v)
		assert.Equal(t, tc.want, got, "bucket of %v", tc.v)
	}
	assert.True(t, math.IsInf(learn.BucketUpper(learn.MaxBucket), 1))
	h := histogramOf(t, math.MaxFloat64)
	v, ok := h.Quantile(1)
	assert.True(t, ok)
	assert.True(t, math.IsInf(v, 1), "above the highest edge: unbounded")
	// Every edge is in its own bucket, and just above it in the next.
	for i := learn.MinBucket; i < learn.MaxBucket; i++ {
		up := learn.BucketUpper(i)
		got, err := learn.BucketOf(up)
		require.NoError(t, err)
		require.Equal(t, i, got, "edge of bucket %d", i)
		got, err = learn.BucketOf(math.Nextafter(up, math.Inf(1)))
		require.NoError(t, err)
		require.Equal(t, i+1, got, "just above bucket %d", i)
	}
}

func TestHistogramRefusesBadInput(t *testing.T) {
	var h learn.Histogram
	for _, v := range []float64{-1, math.NaN(), math.Inf(1), math.Inf(-1)} {
		assert.ErrorIs(t, h.Add(v), learn.ErrBadSample, "%v", v)
	}
	for _, tc := range []struct {
		i      int
		n, sum float64
	}{
		{learn.MinBucket - 1, 1, 0},
		{learn.MaxBucket + 1, 1, 0},
		{0, -1, 0},
		{0, math.NaN(), 0},
		{0, 1, math.Inf(1)},
		{0, 1, -5},
	} {
		assert.ErrorIs(t, h.AddBucket(tc.i, tc.n, tc.sum), learn.ErrBadSample, "%+v", tc)
	}
	assert.Zero(t, h.Count(), "nothing bad was recorded")
	assert.Zero(t, h.Sum())
	h = histogramOf(t, 1, 2, 3)
	for _, q := range []float64{-0.1, 1.1, math.NaN()} {
		_, ok := h.Quantile(q)
		assert.False(t, ok, "quantile %v", q)
	}
}

func TestHistogramCloneIsIndependent(t *testing.T) {
	h := histogramOf(t, 1, 2)
	c := h.Clone()
	require.NoError(t, c.Add(1000))
	assert.InDelta(t, 2, h.Count(), 0)
	assert.Len(t, h.Buckets(), 2)
	assert.Len(t, c.Buckets(), 3)
}

func TestCalibrateInput(t *testing.T) {
	for _, tc := range []struct {
		name     string
		estimate int64
		ratio    float64
		want     int64
	}{
		{"scaled, rounded up", 1000, 1.234, 1234},
		{"below the floor", 1000, 0.1, 250},
		{"above the ceiling", 1000, 3, 2000},
		{"NaN leaves it", 1000, math.NaN(), 1000},
		{"zero ratio leaves it", 1000, 0, 1000},
		{"no estimate", 0, 1.5, 0},
	} {
		assert.Equal(t, tc.want, learn.CalibrateInput(tc.estimate, tc.ratio), tc.name)
	}
}

func TestValidateKind(t *testing.T) {
	for _, ok := range []string{"Chat", "Messages", "summarize-v2", "team_a.classify", "GenerateContent"} {
		assert.NoError(t, capacity.ValidateKind(ok), ok)
	}
	for _, bad := range []string{"", "two words", "a/b", "a:b", "é", string(make([]byte, capacity.MaxKindLength+1)),
		"sk-ant-api03-4fQ9xZ2mB7kL1pW8rT3vY6nH0jD5sA", "AIzaSyD4fQ9xZ2mB7kL1pW8rT3vY6nH0jD5sAx"} {
		assert.ErrorIs(t, capacity.ValidateKind(bad), capacity.ErrInvalidKind, "%q", bad)
	}
}

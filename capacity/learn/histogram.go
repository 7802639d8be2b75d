package learn

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Histogram bucketing. Bucket i holds the values in (2^((i-1)/8), 2^(i/8)]:
// eight buckets per doubling, each about 9 % wide. Values at or below the
// lowest edge fall in MinBucket, values above the highest in
// MaxBucket, so every finite non-negative value has a bucket.
const (
	histogramBucketsPerDoubling = 8
	// MinBucket is the lowest bucket: values up to 2^-16, zero
	// included.
	MinBucket = -16 * histogramBucketsPerDoubling
	// MaxBucket is the highest bucket: values above 2^40 land in it.
	MaxBucket = 40 * histogramBucketsPerDoubling
)

// DefaultCap is the count above which a Histogram halves when its
// Cap is zero: it then weighs roughly the last 1,000 to 2,000 samples.
const DefaultCap = 2000

// ErrBadSample is returned (wrapped) for a value a Histogram cannot hold:
// negative, NaN or infinite, or a bucket index or count out of range.
var ErrBadSample = errors.New("learn: bad histogram sample")

// Histogram is a decaying histogram of non-negative values in logarithmic
// buckets (about 9 % wide), with their count and sum. When its count
// exceeds Cap it halves every bucket, the count and the sum, so old samples
// weigh half as much and its quantiles follow a change of the distribution
// within about Cap samples. Counts are fractional after a halving.
//
// Quantiles are a bucket's upper edge: they err high by less than a
// bucket's width, never low (for values above 2^-16).
//
// The zero value is an empty histogram with DefaultCap. A
// Histogram is a value: it is not safe for concurrent use, and Clone
// returns an independent copy.
type Histogram struct {
	// Cap is the count above which the histogram halves. If zero,
	// DefaultCap.
	Cap float64

	count, sum float64
	buckets    map[int]float64 // index → count
}

// BucketOf returns the index of the bucket v falls in. It returns
// an error wrapping ErrBadSample for a negative, NaN or infinite v.
func BucketOf(v float64) (int, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("%w: %v", ErrBadSample, v)
	}
	if v <= BucketUpper(MinBucket) {
		return MinBucket, nil
	}
	i := int(math.Ceil(math.Log2(v) * histogramBucketsPerDoubling))
	// Log2 may be off by an ulp near an edge: settle on the bucket whose
	// range holds v.
	if i > MinBucket && v <= BucketUpper(i-1) {
		i--
	} else if v > BucketUpper(i) {
		i++
	}
	return min(i, MaxBucket), nil
}

// BucketUpper returns the upper edge of bucket i, 2^(i/8); the
// highest bucket's is +Inf.
func BucketUpper(i int) float64 {
	if i >= MaxBucket {
		return math.Inf(1)
	}
	return math.Exp2(float64(i) / histogramBucketsPerDoubling)
}

func (h *Histogram) limit() float64 {
	if h.Cap > 0 {
		return h.Cap
	}
	return DefaultCap
}

// Add records one value, halving the histogram if its count then exceeds
// Cap. It returns an error wrapping ErrBadSample, and records nothing, for a
// negative, NaN or infinite v.
func (h *Histogram) Add(v float64) error {
	i, err := BucketOf(v)
	if err != nil {
		return err
	}
	if err := h.AddBucket(i, 1, v); err != nil {
		return err
	}
	if h.count > h.limit() {
		h.Halve()
	}
	return nil
}

// AddBucket adds n samples whose values sum to sum to bucket i without
// halving: it is how a store rebuilds a histogram it keeps elsewhere. It
// returns an error wrapping ErrBadSample, and adds nothing, for an index
// out of [MinBucket, MaxBucket], a negative, NaN or
// infinite n or sum, or one that would make the count or sum overflow.
func (h *Histogram) AddBucket(i int, n, sum float64) error {
	switch {
	case i < MinBucket || i > MaxBucket:
		return fmt.Errorf("%w: bucket %d out of [%d, %d]", ErrBadSample, i, MinBucket, MaxBucket)
	case !finiteNonNegative(n) || !finiteNonNegative(sum):
		return fmt.Errorf("%w: count %v, sum %v", ErrBadSample, n, sum)
	case math.IsInf(h.count+n, 0) || math.IsInf(h.sum+sum, 0):
		return fmt.Errorf("%w: the count or sum would overflow", ErrBadSample)
	case n == 0:
		h.sum += sum
		return nil
	}
	if h.buckets == nil {
		h.buckets = make(map[int]float64)
	}
	h.buckets[i] += n
	h.count += n
	h.sum += sum
	return nil
}

// AddSum adds sum to the histogram's sum without a sample: with AddBucket,
// for a store whose sum is kept apart from its buckets. It returns an error
// wrapping ErrBadSample for a negative, NaN or infinite sum.
func (h *Histogram) AddSum(sum float64) error {
	return h.AddBucket(MinBucket, 0, sum)
}

func finiteNonNegative(x float64) bool {
	return !math.IsNaN(x) && !math.IsInf(x, 0) && x >= 0
}

// histogramForget is the count at or below which a bucket is dropped when
// the histogram halves (one sample halved six times).
const histogramForget = 1.0 / 64

// Halve halves every bucket, the count and the sum, and drops the buckets
// left at or below 1/64 of a sample.
func (h *Histogram) Halve() {
	h.count, h.sum = 0, h.sum/2
	for i, n := range h.buckets {
		n /= 2
		if n <= histogramForget {
			delete(h.buckets, i)
			continue
		}
		h.buckets[i] = n
		h.count += n
	}
}

// Count returns the (decayed) number of samples.
func (h Histogram) Count() float64 { return h.count }

// Sum returns the (decayed) sum of the samples.
func (h Histogram) Sum() float64 { return h.sum }

// Mean returns Sum / Count, or 0 for an empty histogram.
func (h Histogram) Mean() float64 {
	if h.count <= 0 {
		return 0
	}
	return h.sum / h.count
}

// Quantile returns the upper edge of the bucket that holds the q-quantile
// (0 ≤ q ≤ 1) of the samples: Quantile(0.95) is at or above 95 % of them.
// ok is false for an empty histogram or a q outside [0, 1].
func (h Histogram) Quantile(q float64) (v float64, ok bool) {
	if h.count <= 0 || math.IsNaN(q) || q < 0 || q > 1 {
		return 0, false
	}
	idx := h.indexes()
	rank := q * h.count
	var seen float64
	for _, i := range idx {
		seen += h.buckets[i]
		if seen >= rank {
			return BucketUpper(i), true
		}
	}
	return BucketUpper(idx[len(idx)-1]), true // rounding: the last bucket
}

// indexes returns the non-empty buckets in ascending order.
func (h Histogram) indexes() []int {
	idx := make([]int, 0, len(h.buckets))
	for i := range h.buckets {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	return idx
}

// Bucket is one non-empty bucket of a Histogram.
type Bucket struct {
	Index int
	Count float64
}

// Buckets returns the non-empty buckets in ascending order.
func (h Histogram) Buckets() []Bucket {
	idx := h.indexes()
	out := make([]Bucket, len(idx))
	for k, i := range idx {
		out[k] = Bucket{Index: i, Count: h.buckets[i]}
	}
	return out
}

// Clone returns an independent copy of h.
func (h Histogram) Clone() Histogram {
	c := h
	if h.buckets != nil {
		c.buckets = make(map[int]float64, len(h.buckets))
		for i, n := range h.buckets {
			c.buckets[i] = n
		}
	}
	return c
}

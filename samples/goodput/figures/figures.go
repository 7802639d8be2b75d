// Package figures computes the goodput sample's figures from a fake
// provider's record (testsuite.Entry): what the run was charged, the
// theoretical minimum drain time the provider's limits allow for it, the
// utilization of the binding dimension, and the series the chart draws.
//
// Definitions, for the per-minute dimensions d the scope limits (requests,
// tokens, input and output tokens), with capacity_d the provider's bucket
// (testsuite.Limits.Burst) and rate_d its limit per second:
//
//   - charged_d sums Entry.Cost(d) over the admitted requests that arrived
//     from the first request to the end of the drain (batch and interactive
//     alike; the provider charges refused requests nothing but a request).
//   - minimum_d = max(0, charged_d − capacity_d) / rate_d: no client can be
//     charged charged_d sooner, counting from the first request, since the
//     bucket starts full and refills at rate_d.
//   - The binding dimension is the one with the largest minimum; the
//     theoretical minimum is its minimum.
//   - drain is the time from the first request's arrival to the end (the
//     last batch call's completion), and drain ratio = drain / minimum.
//   - utilization = charged_b / (capacity_b + rate_b × drain) for the
//     binding dimension b: the share of what the provider could have
//     admitted over the drain that the run was charged.
//   - the excess, drain − minimum, split at the last batch call (Tail):
//     what the binding bucket still held when the provider admitted it, the
//     time from its arrival to the end (its answer), and what the provider
//     admitted meanwhile. Only the first is the client's to spend: the
//     answer comes after the last call whatever sent it, and only calls
//     held back until then fill it.
package figures

import (
	"math"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/testsuite"
)

// Bound is one limited per-minute dimension's share of the record.
type Bound struct {
	// Dimension is the dimension.
	Dimension testsuite.Dimension
	// Charged is charged_d: what the admitted requests were charged in it.
	Charged int64
	// Capacity is the provider's bucket, Rate its refill per second.
	Capacity, Rate float64
	// Minimum is max(0, Charged − Capacity) / Rate.
	Minimum time.Duration
}

// Bounds returns the Bound of every limited per-minute dimension of l over
// the admitted, non-Direct entries that arrived no later than end, in
// Dimension order.
func Bounds(entries []testsuite.Entry, l testsuite.Limits, end time.Time) []Bound {
	var out []Bound
	for _, d := range testsuite.Dimensions() {
		if d.Daily() || l.Limit(d) <= 0 {
			continue
		}
		b := Bound{Dimension: d, Capacity: l.Burst(d), Rate: float64(l.Limit(d)) / 60}
		for _, e := range entries {
			if e.Admitted && !e.Direct && !e.Arrival.After(end) {
				b.Charged += e.Cost(d)
			}
		}
		b.Minimum = seconds(math.Max(0, float64(b.Charged)-b.Capacity) / b.Rate)
		out = append(out, b)
	}
	return out
}

// Binding returns the bound with the largest Minimum (the first of equals);
// ok is false for no bounds.
func Binding(bounds []Bound) (b Bound, ok bool) {
	for i, c := range bounds {
		if i == 0 || c.Minimum > b.Minimum {
			b, ok = c, true
		}
	}
	return b, ok
}

// Figures are one run's numbers.
type Figures struct {
	// Requests and RateLimited count the record's requests and its 429s.
	Requests, RateLimited int
	// First is the first request's arrival.
	First time.Time
	// Drain runs from First to the end the caller gave.
	Drain time.Duration
	// Binding is the binding dimension's bound; Bounds are all of them.
	Binding Bound
	Bounds  []Bound
	// Utilization is Binding.Charged / (Binding.Capacity + Binding.Rate × Drain).
	Utilization float64
	// DrainRatio is Drain / Binding.Minimum; 0 when the minimum is 0.
	DrainRatio float64
	// Tail splits Drain − Binding.Minimum at the last batch call; zero
	// when the record tags no batch call (BatchTag).
	Tail Tail
}

// BatchTag is the Entry.Tag of the batch's requests: the sample's
// transport sets it, so Measure finds the last batch call.
const BatchTag = "batch"

// Tail splits the drain's excess over the minimum at the last batch call,
// the admitted request tagged BatchTag answered last by the end. In
// seconds of the binding dimension's refill:
//
//   - Left is what the binding bucket still held right after the provider
//     admitted it: capacity the run left unused;
//   - Answer is from its arrival to the end;
//   - Filled is what the provider admitted from its arrival to the end.
//
// Drain − Minimum = Left + Answer − Filled + what the binding bucket lost
// at its capacity before that call (none, unless the run left it full),
// for a binding dimension charged at arrival.
type Tail struct {
	Left, Answer, Filled time.Duration
}

// Measure returns the figures of a record under limits l, for a drain that
// ended at end.
func Measure(entries []testsuite.Entry, l testsuite.Limits, end time.Time) Figures {
	var f Figures
	for _, e := range entries {
		if e.Direct {
			continue
		}
		f.Requests++
		if e.Status == 429 {
			f.RateLimited++
		}
		if f.First.IsZero() || e.Arrival.Before(f.First) {
			f.First = e.Arrival
		}
	}
	if f.Requests == 0 {
		return f
	}
	f.Drain = end.Sub(f.First)
	f.Bounds = Bounds(entries, l, end)
	f.Binding, _ = Binding(f.Bounds)
	if granted := f.Binding.Capacity + f.Binding.Rate*f.Drain.Seconds(); granted > 0 {
		f.Utilization = float64(f.Binding.Charged) / granted
	}
	if f.Binding.Minimum > 0 {
		f.DrainRatio = f.Drain.Seconds() / f.Binding.Minimum.Seconds()
	}
	f.Tail = tail(entries, f.Binding, end)
	return f
}

// tail returns the Tail of a record whose binding bound is b, for a drain
// that ended at end.
func tail(entries []testsuite.Entry, b Bound, end time.Time) Tail {
	var last *testsuite.Entry
	for i, e := range entries {
		if e.Admitted && !e.Direct && e.Tag == BatchTag && !e.Done.After(end) && (last == nil || e.Done.After(last.Done)) {
			last = &entries[i]
		}
	}
	if last == nil || b.Rate <= 0 {
		return Tail{}
	}
	var filled int64
	for _, e := range entries {
		if e.Admitted && !e.Direct && e.Arrival.After(last.Arrival) && !e.Arrival.After(end) {
			filled += e.Cost(b.Dimension)
		}
	}
	return Tail{
		Left:   seconds(float64(last.Remaining[b.Dimension]) / b.Rate),
		Answer: end.Sub(last.Arrival),
		Filled: seconds(float64(filled) / b.Rate),
	}
}

// Percentile returns the p-quantile (0 < p ≤ 1) of ds by the nearest-rank
// method: the smallest value that at least p of ds do not exceed. It
// returns 0 for no values.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

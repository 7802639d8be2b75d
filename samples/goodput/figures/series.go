package figures

import (
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/testsuite"
)

// Point is one sample of a series: T seconds after the first request, value V.
type Point struct {
	T, V float64
}

// Level returns the provider's remaining level of dimension d as a fraction
// of its bucket, right after each admission decision (Entry.Remaining), in
// arrival order. capacity is the bucket (testsuite.Limits.Burst).
func Level(entries []testsuite.Entry, d testsuite.Dimension, capacity float64, first time.Time) []Point {
	if capacity <= 0 {
		return nil
	}
	var out []Point
	for _, e := range byArrival(entries) {
		out = append(out, Point{T: e.Arrival.Sub(first).Seconds(), V: float64(e.Remaining[d]) / capacity})
	}
	return out
}

// InFlight returns the number of admitted requests the provider was serving,
// after each arrival and completion, in time order.
func InFlight(entries []testsuite.Entry, first time.Time) []Point {
	type step struct {
		at    time.Time
		delta int
	}
	var steps []step
	for _, e := range entries {
		if e.Admitted && !e.Direct {
			steps = append(steps, step{e.Arrival, 1}, step{e.Done, -1})
		}
	}
	slices.SortStableFunc(steps, func(a, b step) int { return a.at.Compare(b.at) })
	out := make([]Point, 0, len(steps))
	n := 0
	for _, s := range steps {
		n += s.delta
		out = append(out, Point{T: s.at.Sub(first).Seconds(), V: float64(n)})
	}
	return out
}

// RateLimited returns the arrival times (seconds after first) of the 429s.
func RateLimited(entries []testsuite.Entry, first time.Time) []float64 {
	var out []float64
	for _, e := range byArrival(entries) {
		if e.Status == 429 {
			out = append(out, e.Arrival.Sub(first).Seconds())
		}
	}
	return out
}

// byArrival returns the non-Direct entries sorted by arrival.
func byArrival(entries []testsuite.Entry) []testsuite.Entry {
	var out []testsuite.Entry
	for _, e := range entries {
		if !e.Direct {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b testsuite.Entry) int { return a.Arrival.Compare(b.Arrival) })
	return out
}

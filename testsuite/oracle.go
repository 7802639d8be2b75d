package testsuite

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// DimensionReport is the oracle's figures for one limited dimension.
type DimensionReport struct {
	// Dimension is the dimension reported.
	Dimension Dimension
	// Limit is the configured limit per Period.
	Limit int64
	// Period is a minute, or a day for the daily quotas.
	Period time.Duration
	// Burst is the bucket's capacity (Limits.Burst); the whole Limit for a
	// daily quota.
	Burst float64
	// Bound is Burst + Limit: the most a client that is never refused can be
	// charged in one window of Period. A conforming client has Peak ≤ Bound
	// (≤ Limit under per-second enforcement plus one second's worth).
	Bound float64
	// Peak is the largest total charged in any window [t, t+Period),
	// counting every charge of the record — the request charged for each
	// refused call included — at the time it was made (Entry.Arrival for
	// Charged, Entry.Done for Settled).
	Peak int64
	// PeakStart is the start of the first window that reaches Peak.
	PeakStart time.Time
	// Charged is the total charged over the record.
	Charged int64
	// Saturated counts the entries saturated in this dimension (see Report).
	Saturated int
}

// Report is the oracle's verdict on a record under fixed limits.
//
// Saturation and utilization are defined for the per-minute dimensions.
// An entry is saturated in dimension d if it was refused by d's bucket (its
// Cause is d's rate-limit cause), or it was admitted with a positive cost in
// d (Entry.Cost) and, right after its admission, d had less than that cost
// left (Entry.Remaining[d] < cost): the same request could not have been
// admitted again at that instant.
//
// The binding dimension is the one with the most saturated entries (ties go
// to the lower Dimension). The saturated interval [SaturatedFrom,
// SaturatedTo] runs from the Arrival of the binding dimension's first
// saturated entry to the Arrival of its last. Utilization is
//
//	BindingCharged ÷ (Limit/minute × (SaturatedTo − SaturatedFrom) + Burst)
//
// where BindingCharged sums the binding dimension's charges of admitted
// entries made inside the interval (Charged at Arrival, Settled at Done).
// The denominator is the most a token bucket can grant over the interval,
// so Utilization is at most 1 (barring output debt) and near 1 for a client
// that keeps the binding budget busy without wasting it.
type Report struct {
	// Entries counts the entries analyzed.
	Entries int
	// ByStatus counts entries by HTTP status (0: connection closed).
	ByStatus map[int]int
	// ByCause counts the entries that did not succeed, by cause.
	ByCause map[Cause]int
	// RateLimited counts the 429s by cause.
	RateLimited map[Cause]int
	// Dimensions has one report per limited dimension, in Dimension order.
	Dimensions []DimensionReport
	// Saturated reports whether any entry was saturated; the fields below
	// are meaningful only if so.
	Saturated bool
	// Binding is the binding dimension.
	Binding Dimension
	// SaturatedFrom and SaturatedTo bound the saturated interval.
	SaturatedFrom, SaturatedTo time.Time
	// BindingCharged is the numerator of Utilization.
	BindingCharged int64
	// Utilization of the binding dimension over the saturated interval.
	Utilization float64
}

// For returns the report of dimension d; ok is false if d is not limited.
func (r Report) For(d Dimension) (DimensionReport, bool) {
	for _, dr := range r.Dimensions {
		if dr.Dimension == d {
			return dr, true
		}
	}
	return DimensionReport{}, false
}

// String summarizes the report on a few lines.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests, 429s %v\n", r.Entries, r.RateLimited)
	for _, d := range r.Dimensions {
		fmt.Fprintf(&b, "  %-16s limit %d/%v burst %.0f peak %d bound %.0f saturated %d\n",
			d.Dimension, d.Limit, d.Period, d.Burst, d.Peak, d.Bound, d.Saturated)
	}
	if r.Saturated {
		fmt.Fprintf(&b, "  binding %s over %v: utilization %.3f\n",
			r.Binding, r.SaturatedTo.Sub(r.SaturatedFrom), r.Utilization)
	}
	return b.String()
}

// saturated reports whether e is saturated in per-minute dimension d.
func saturated(e *Entry, d Dimension) bool {
	if e.Cause == causeOf(d) {
		return true
	}
	cost := e.Cost(d)
	return e.Admitted && cost > 0 && e.Remaining[d] < cost
}

// Analyze runs the oracle on the entries of one scope under limits l (the
// limits in force for the whole record). Entries may be in any order.
func Analyze(entries []Entry, l Limits) Report {
	r := Report{Entries: len(entries), ByStatus: map[int]int{}, ByCause: map[Cause]int{}, RateLimited: map[Cause]int{}}
	for i := range entries {
		e := &entries[i]
		r.ByStatus[e.Status]++
		if e.Cause != CauseNone {
			r.ByCause[e.Cause]++
		}
		if e.Status == 429 {
			r.RateLimited[e.Cause]++
		}
	}
	best := 0
	for _, d := range Dimensions() {
		if l.Limit(d) <= 0 {
			continue
		}
		dr := peak(entries, d)
		dr.Limit, dr.Period, dr.Burst = l.Limit(d), d.Period(), l.Burst(d)
		dr.Bound = dr.Burst + float64(dr.Limit)
		if !d.Daily() {
			for i := range entries {
				if saturated(&entries[i], d) {
					dr.Saturated++
				}
			}
			if dr.Saturated > best {
				best, r.Binding, r.Saturated = dr.Saturated, d, true
			}
		}
		r.Dimensions = append(r.Dimensions, dr)
	}
	if r.Saturated {
		utilization(&r, entries, l)
	}
	return r
}

// utilization fills the saturated interval and Utilization of r.Binding.
func utilization(r *Report, entries []Entry, l Limits) {
	d := r.Binding
	first := true
	for i := range entries {
		e := &entries[i]
		if !saturated(e, d) {
			continue
		}
		if first || e.Arrival.Before(r.SaturatedFrom) {
			r.SaturatedFrom = e.Arrival
		}
		if first || e.Arrival.After(r.SaturatedTo) {
			r.SaturatedTo = e.Arrival
		}
		first = false
	}
	in := func(t time.Time) bool { return !t.Before(r.SaturatedFrom) && !t.After(r.SaturatedTo) }
	for i := range entries {
		e := &entries[i]
		if !e.Admitted {
			continue
		}
		if in(e.Arrival) {
			r.BindingCharged += e.Charged[d]
		}
		if in(e.Done) {
			r.BindingCharged += e.Settled[d]
		}
	}
	span := r.SaturatedTo.Sub(r.SaturatedFrom)
	granted := float64(l.Limit(d))*float64(span)/float64(time.Minute) + l.Burst(d)
	r.Utilization = float64(r.BindingCharged) / granted
}

type charge struct {
	at     time.Time
	amount int64
}

// peak returns the dimension's Charged total and its peak over any window
// [t, t+period).
func peak(entries []Entry, d Dimension) DimensionReport {
	dr := DimensionReport{Dimension: d}
	var cs []charge
	for i := range entries {
		e := &entries[i]
		if n := e.Charged[d]; n > 0 {
			cs = append(cs, charge{e.Arrival, n})
		}
		if n := e.Settled[d]; n > 0 {
			cs = append(cs, charge{e.Done, n})
		}
	}
	slices.SortStableFunc(cs, func(a, b charge) int { return a.at.Compare(b.at) })
	period := d.Period()
	var sum int64
	j := 0
	for i := range cs {
		end := cs[i].at.Add(period)
		for j < len(cs) && cs[j].at.Before(end) {
			sum += cs[j].amount
			j++
		}
		if sum > dr.Peak {
			dr.Peak, dr.PeakStart = sum, cs[i].at
		}
		dr.Charged += cs[i].amount
		sum -= cs[i].amount
	}
	return dr
}

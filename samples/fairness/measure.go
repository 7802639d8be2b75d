package main

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/testsuite"
)

// Record is what a run measured, from which Measure computes the figures:
// the fake provider's record, each bulk tenant's backlogged span and the
// interactive calls.
type Record struct {
	Entries []testsuite.Entry
	Limits  testsuite.Limits
	// Spans are the bulk tenants' backlogged spans, the newcomer last.
	Spans []Span
	// End is the end of the measured window: when the first bulk tenant
	// stopped being backlogged (or the run's timeout).
	End         time.Time
	Interactive []InteractiveCall
}

// Span is when a bulk tenant was backlogged: from scheduling its backlog to
// its last call's completion (zero End: still backlogged at Record.End).
type Span struct {
	Tenant     string
	Weight     float64
	Start, End time.Time
}

// InteractiveCall is one interactive call: its index (its tag is
// Tag(Interactive, Index)), when it was scheduled, and when it completed
// (zero if it never did).
type InteractiveCall struct {
	Index           int
	Scheduled, Done time.Time
	Failed          bool
}

// Figures are a run's figures (see the package documentation for their
// definitions).
type Figures struct {
	Fair
	// Newcomer is Fair counted from the newcomer's arrival, when every
	// call of A, B and C has long reached the store (the initial bucket
	// was granted first-come as they did): context, not a target.
	Newcomer Fair
	// LargestCall is the largest bulk call the provider admitted, in tokens
	// charged.
	LargestCall int64
	// NewcomerWait is from the newcomer scheduling its backlog to its first
	// request's arrival (the window's length if none arrived).
	NewcomerWait time.Duration
	// InteractiveP99 is the p99 of the interactive calls' schedule to
	// dispatch (first arrival at the provider); InteractiveP99Done of their
	// schedule to completion.
	InteractiveP99, InteractiveP99Done  time.Duration
	InteractiveCalls, InteractiveFailed int
	// BulkShareOfLeftover is BulkTokens / (Capacity − InteractiveTokens)
	// over the saturated window, from Start (the first request's arrival)
	// to Record.End.
	BulkShareOfLeftover            float64
	Start                          time.Time
	Capacity                       float64
	BulkTokens, InteractiveTokens  int64
	ProviderRequests, Provider429s int
	NewcomerAt                     time.Time
}

// Fair are the fairness figures, counted from a moment on.
type Fair struct {
	// From is the moment: no interval starts before it.
	From time.Time
	// Jain is the smaller of JainBefore (A, B and C, until the newcomer
	// arrives) and JainAfter (the four, from then to Record.End); 0 for a
	// phase with no tokens.
	Jain, JainBefore, JainAfter float64
	// Before and After are each tenant's tokens in the two phases.
	Before, After map[string]int64
	// MaxGap is the largest service gap, in weight-normalized tokens,
	// between GapPair, reached at GapAt.
	MaxGap  float64
	GapPair string
	GapAt   time.Time
}

// Measure computes the figures of r.
func Measure(r Record) Figures {
	var f Figures
	f.Before, f.After = map[string]int64{}, map[string]int64{}
	entries := slices.Clone(r.Entries)
	slices.SortStableFunc(entries, func(a, b testsuite.Entry) int { return a.Arrival.Compare(b.Arrival) })
	f.ProviderRequests = len(entries)
	for _, e := range entries {
		if e.Status == 429 {
			f.Provider429s++
		}
	}
	if len(entries) == 0 || len(r.Spans) < 2 {
		return f
	}
	newcomer := r.Spans[len(r.Spans)-1]
	end := r.End
	f.Start, f.NewcomerAt = entries[0].Arrival, newcomer.Start
	f.Fair = fair(r.Spans, entries, time.Time{}, end)
	if !newcomer.Start.IsZero() {
		f.Newcomer = fair(r.Spans, entries, newcomer.Start, end)
	}

	// The newcomer's wait.
	if !newcomer.Start.IsZero() {
		f.NewcomerWait = end.Sub(newcomer.Start)
	}
	for _, e := range entries {
		if !newcomer.Start.IsZero() && tenantOf(e.Tag) == newcomer.Tenant {
			f.NewcomerWait = e.Arrival.Sub(newcomer.Start)
			break
		}
	}

	// The interactive calls' latency.
	dispatched := map[string]time.Time{}
	for _, e := range entries {
		if _, seen := dispatched[e.Tag]; !seen && tenantOf(e.Tag) == Interactive {
			dispatched[e.Tag] = e.Arrival
		}
	}
	var toDispatch, toDone []time.Duration
	for _, c := range r.Interactive {
		f.InteractiveCalls++
		at, ok := dispatched[Tag(Interactive, c.Index)]
		if !ok {
			at = end // never dispatched: at least until the window's end
		}
		done := c.Done
		if done.IsZero() {
			done = later(end, at) // unanswered: at least until the window's end
		}
		if c.Failed || c.Done.IsZero() {
			f.InteractiveFailed++
		}
		toDispatch = append(toDispatch, at.Sub(c.Scheduled))
		toDone = append(toDone, done.Sub(c.Scheduled))
	}
	f.InteractiveP99, f.InteractiveP99Done = percentile(toDispatch, 0.99), percentile(toDone, 0.99)

	// What bulk was served of what the interactive stream left.
	for _, e := range entries {
		if !e.Admitted || e.Arrival.After(end) {
			continue
		}
		switch tokens := e.Cost(testsuite.Tokens); tenantOf(e.Tag) {
		case Interactive:
			f.InteractiveTokens += tokens
		default:
			f.BulkTokens += tokens
			f.LargestCall = max(f.LargestCall, tokens)
		}
	}
	f.Capacity = r.Limits.Burst(testsuite.Tokens) + float64(r.Limits.TokensPerMinute)/60*end.Sub(f.Start).Seconds()
	if left := f.Capacity - float64(f.InteractiveTokens); left > 0 {
		f.BulkShareOfLeftover = float64(f.BulkTokens) / left
	}
	return f
}

// fair returns the fairness figures of spans (the newcomer last) counted
// from from on, up to end.
func fair(spans []Span, entries []testsuite.Entry, from, end time.Time) Fair {
	f := Fair{From: from, Before: map[string]int64{}, After: map[string]int64{}}
	first, newcomer := spans[:len(spans)-1], spans[len(spans)-1]
	start, until := from, end
	for _, s := range first {
		start = later(start, s.Start)
	}
	if !newcomer.Start.IsZero() {
		until = earlier(end, newcomer.Start)
	}
	f.JainBefore = jain(first, entries, start, until, f.Before)
	if !newcomer.Start.IsZero() {
		f.JainAfter = jain(spans, entries, later(from, newcomer.Start), end, f.After)
	}
	f.Jain = math.Min(f.JainBefore, f.JainAfter)
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.Start.IsZero() || b.Start.IsZero() {
				continue
			}
			if g, at := gap(a, b, entries, from, end); g > f.MaxGap || f.GapPair == "" {
				f.MaxGap, f.GapPair, f.GapAt = g, a.Tenant+"-"+b.Tenant, at
			}
		}
	}
	return f
}

// jain returns Jain's index of the weight-normalized tokens the tenants of
// spans were charged for the requests that arrived in [from, to), and adds
// each tenant's tokens to tokens. A tenant not backlogged over the whole
// interval is left out.
func jain(spans []Span, entries []testsuite.Entry, from, to time.Time, tokens map[string]int64) float64 {
	if !to.After(from) {
		return 0
	}
	var sum, squares float64
	n := 0
	for _, s := range spans {
		if s.Start.After(from) || !s.End.IsZero() && s.End.Before(to) {
			continue
		}
		t := served(s.Tenant, entries, from, to)
		tokens[s.Tenant] = t
		x := float64(t) / s.Weight
		sum += x
		squares += x * x
		n++
	}
	if squares == 0 {
		return 0
	}
	return sum * sum / (float64(n) * squares)
}

// served sums the tokens tenant's admitted requests that arrived in
// [from, to) were charged.
func served(tenant string, entries []testsuite.Entry, from, to time.Time) int64 {
	var t int64
	for _, e := range entries {
		if e.Admitted && tenantOf(e.Tag) == tenant && !e.Arrival.Before(from) && e.Arrival.Before(to) {
			t += e.Cost(testsuite.Tokens)
		}
	}
	return t
}

// gap returns the largest difference between a's and b's weight-normalized
// tokens, counted from when both were backlogged (and no earlier than
// from), while both were (and no later than end), and when it was reached.
// entries are in arrival order.
func gap(a, b Span, entries []testsuite.Entry, from, end time.Time) (float64, time.Time) {
	from, to := later(later(from, a.Start), b.Start), end
	for _, s := range []Span{a, b} {
		if !s.End.IsZero() {
			to = earlier(to, s.End)
		}
	}
	var na, nb, largest float64
	var at time.Time
	for i, e := range entries {
		if e.Arrival.Before(from) || e.Arrival.After(to) || !e.Admitted {
			continue
		}
		switch tenantOf(e.Tag) {
		case a.Tenant:
			na += float64(e.Cost(testsuite.Tokens)) / a.Weight
		case b.Tenant:
			nb += float64(e.Cost(testsuite.Tokens)) / b.Weight
		default:
			continue
		}
		if i+1 < len(entries) && entries[i+1].Arrival.Equal(e.Arrival) {
			continue // the moment is not over
		}
		if d := math.Abs(na - nb); d > largest {
			largest, at = d, e.Arrival
		}
	}
	return largest, at
}

// tenantOf returns the tenant of a tag ("A/12": "A").
func tenantOf(tag string) string {
	t, _, _ := strings.Cut(tag, "/")
	return t
}

// percentile returns the p-th percentile of ds (nearest rank), 0 for none.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

func later(a, b time.Time) time.Time {
	if a.IsZero() || b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

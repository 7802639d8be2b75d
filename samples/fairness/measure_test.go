package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/testsuite"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// entry is an admitted request of tag arriving at s, charged tokens.
func entry(tag string, s float64, tokens int64) testsuite.Entry {
	var c testsuite.Charges
	c[testsuite.Tokens] = tokens
	return testsuite.Entry{Tag: tag, Arrival: at(s), Done: at(s + 0.1), Status: 200, Admitted: true, Charged: c}
}

func TestMeasure(t *testing.T) {
	r := Record{
		Limits: testsuite.Limits{TokensPerMinute: 60_000, BurstWindow: 5 * time.Second}, // 1,000 a second, a bucket of 5,000
		Spans: []Span{
			{Tenant: "A", Weight: 1, Start: at(0)},
			{Tenant: "B", Weight: 1, Start: at(0)},
			{Tenant: "C", Weight: 2, Start: at(0)},
			{Tenant: "D", Weight: 1, Start: at(4), End: at(10)},
		},
		End: at(10),
		Interactive: []InteractiveCall{
			{Index: 0, Scheduled: at(0.5), Done: at(1)},
			{Index: 1, Scheduled: at(6), Done: at(6.5)},
		},
	}
	r.Entries = []testsuite.Entry{
		entry("A/0", 0, 1000), entry("B/0", 0.1, 1000), entry("C/0", 0.2, 2000),
		entry("interactive/0", 0.7, 500),
		entry("A/1", 1, 3000), // A runs 3,000 ahead of B
		entry("B/1", 2, 3000), entry("C/1", 2, 6000),
		entry("D/0", 4.5, 1000), // D waits 0.5 s
		entry("A/2", 5, 1000), entry("B/2", 5, 1000), entry("C/2", 5, 2000),
		entry("interactive/1", 6.25, 500),
		entry("A/3", 7, 2000), entry("B/3", 7, 2000), entry("C/3", 7, 4000), entry("D/1", 7, 2000),
		{Tag: "B/4", Arrival: at(8), Status: 429, Charged: testsuite.Charges{testsuite.Requests: 1}},
		entry("A/9", 11, 5000), // after the window
	}
	f := Measure(r)

	// Before D (0 to 4 s): A 4,000, B 4,000, C 8,000 / 2: equal shares.
	assert.Equal(t, map[string]int64{"A": 4000, "B": 4000, "C": 8000}, f.Before)
	assert.InDelta(t, 1, f.JainBefore, 1e-9)
	// After (4 to 10 s): A, B 3,000, C 6,000 / 2, D 3,000.
	assert.Equal(t, map[string]int64{"A": 3000, "B": 3000, "C": 6000, "D": 3000}, f.After)
	assert.InDelta(t, 1, f.JainAfter, 1e-9)
	assert.InDelta(t, 1, f.Jain, 1e-9)
	// The gap: A 4,000 against B 1,000 at 1 s.
	assert.Equal(t, 3000.0, f.MaxGap)
	assert.Equal(t, "A-B", f.GapPair)
	assert.Equal(t, at(1), f.GapAt)
	assert.Equal(t, int64(6000), f.LargestCall)
	assert.Equal(t, 500*time.Millisecond, f.NewcomerWait)
	// From D's arrival: D 1,000 at 4.5 s against nothing for the others.
	assert.Equal(t, 1000.0, f.Newcomer.MaxGap)
	assert.InDelta(t, 1, f.Newcomer.JainAfter, 1e-9)

	// Interactive: 0.2 s and 0.25 s to the provider.
	assert.Equal(t, 250*time.Millisecond, f.InteractiveP99)
	assert.Equal(t, 500*time.Millisecond, f.InteractiveP99Done)
	assert.Zero(t, f.InteractiveFailed)

	// Capacity over 0 to 10 s: 5,000 + 10 × 1,000; bulk 31,000 of 15,000 − 1,000.
	assert.Equal(t, 15000.0, f.Capacity)
	assert.Equal(t, int64(1000), f.InteractiveTokens)
	assert.Equal(t, int64(31000), f.BulkTokens)
	assert.InDelta(t, 31.0/14, f.BulkShareOfLeftover, 1e-9)
	assert.Equal(t, 1, f.Provider429s)
	assert.Equal(t, 18, f.ProviderRequests)
}

func TestMeasureUnfair(t *testing.T) {
	r := Record{
		Limits: testsuite.Limits{TokensPerMinute: 60_000, BurstWindow: 5 * time.Second},
		Spans: []Span{
			{Tenant: "A", Weight: 1, Start: at(0)},
			{Tenant: "B", Weight: 1, Start: at(0), End: at(3)}, // drained: out of the window
			{Tenant: "D", Weight: 1, Start: at(1)},
		},
		End: at(3),
		Interactive: []InteractiveCall{
			{Index: 0, Scheduled: at(0)},                              // never dispatched nor answered
			{Index: 1, Scheduled: at(1), Done: at(1.5), Failed: true}, // failed at the provider
		},
		Entries: []testsuite.Entry{
			entry("A/0", 0, 4000), entry("B/0", 0, 1000),
			entry("interactive/1", 1.2, 100),
			entry("A/1", 2, 1000), entry("B/1", 2.5, 1000),
		},
	}
	f := Measure(r)
	// Before D: A 4,000, B 1,000: (5,000)² / (2 × 17,000,000).
	assert.InDelta(t, 25.0/34, f.JainBefore, 1e-9)
	// D was never served: its wait is the window's rest, and its share 0.
	assert.Equal(t, 2*time.Second, f.NewcomerWait)
	assert.InDelta(t, 2.0/3, f.JainAfter, 1e-9) // A 1,000, B 1,000, D 0
	assert.Equal(t, 4000.0, f.MaxGap)           // A 5,000 against B 1,000 at 2 s
	assert.Equal(t, 2, f.InteractiveFailed)
	// The unanswered call counts until the window's end.
	assert.Equal(t, 3*time.Second, f.InteractiveP99)
	require.Equal(t, 2, f.InteractiveCalls)
}

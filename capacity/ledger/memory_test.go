package ledger_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/ledger"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
)

func TestMemory(t *testing.T) {
	storetest.RunLedger(t, func(t *testing.T, clock capacity.Clock) ledger.Ledger {
		return ledger.NewMemory(clock)
	})
}

// TestLedgerDay: a ledger day is the date its day window starts on, in the
// boundary's location, and ends when the window does.
func TestLedgerDay(t *testing.T) {
	pacific, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Skip("no time zone data")
	}
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tt := range []struct {
		name    string
		at      string
		b       capacity.DayBoundary
		day     string
		resetAt string
	}{
		{"midnight UTC", "2026-10-15T12:00:00Z", capacity.DayBoundary{}, "2026-10-15", "2026-10-16T00:00:00Z"},
		{"just before midnight", "2026-10-15T23:59:59Z", capacity.DayBoundary{}, "2026-10-15", "2026-10-16T00:00:00Z"},
		{"at midnight, a new day", "2026-10-16T00:00:00Z", capacity.DayBoundary{}, "2026-10-16", "2026-10-17T00:00:00Z"},
		{"an offset: before it, the day before", "2026-10-15T05:00:00Z", capacity.DayBoundary{Offset: 7 * time.Hour}, "2026-10-14", "2026-10-15T07:00:00Z"},
		{"an offset: after it", "2026-10-15T08:00:00Z", capacity.DayBoundary{Offset: 7 * time.Hour}, "2026-10-15", "2026-10-16T07:00:00Z"},
		{"Pacific, morning UTC", "2026-10-15T05:00:00Z", capacity.DayBoundary{Location: pacific}, "2026-10-14", "2026-10-15T07:00:00Z"},
		{"Pacific, DST ends that night", "2026-11-01T12:00:00Z", capacity.DayBoundary{Location: pacific}, "2026-11-01", "2026-11-02T08:00:00Z"},
		{"year end", "2026-12-31T23:00:00Z", capacity.DayBoundary{}, "2026-12-31", "2027-01-01T00:00:00Z"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			day, end := ledger.Day(utc(tt.at), tt.b)
			assert.Equal(t, tt.day, day)
			assert.True(t, end.Equal(utc(tt.resetAt)), "end %v", end.UTC())
			assert.NoError(t, ledger.ValidateDay(day))
		})
	}
}

func TestLedgerTokensOf(t *testing.T) {
	u := capacity.Usage{InputTokens: 100, CacheReadInputTokens: 900, CacheCreationInputTokens: 50, OutputTokens: 30, ExtraReasoningTokens: 12}
	assert.Equal(t, ledger.Tokens{Input: 150, CachedInput: 900, Output: 42}, ledger.TokensOf(u))
}

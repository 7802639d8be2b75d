package accounting_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/accounting"
)

// Gemini's per-day quotas reset at midnight Pacific: limits that leave
// DayReset zero get it from GeminiProfile; limits that name a boundary, even
// UTC, keep theirs; other providers keep midnight UTC.
func TestGeminiDayResetIsMidnightPacific(t *testing.T) {
	gemini, ok := accounting.ProfileFor(capacity.Gemini)
	require.True(t, ok)
	l := accounting.ProfileDayReset(capacity.Limits{RequestsPerDay: 1000}, gemini)
	require.NotNil(t, l.DayReset.Location)
	require.Equal(t, "America/Los_Angeles", l.DayReset.Location.String())

	tests := []struct {
		name string
		at   time.Time
		want time.Time
	}{
		{"summer (PDT)", time.Date(2026, 7, 15, 23, 30, 0, 0, time.UTC), time.Date(2026, 7, 16, 7, 0, 0, 0, time.UTC)},
		{"winter (PST)", time.Date(2026, 1, 15, 23, 30, 0, 0, time.UTC), time.Date(2026, 1, 16, 8, 0, 0, 0, time.UTC)},
		{"after midnight UTC, before midnight Pacific", time.Date(2026, 7, 16, 3, 0, 0, 0, time.UTC), time.Date(2026, 7, 16, 7, 0, 0, 0, time.UTC)},
		{"on the boundary", time.Date(2026, 7, 16, 7, 0, 0, 0, time.UTC), time.Date(2026, 7, 17, 7, 0, 0, 0, time.UTC)},
		{"the day clocks go forward (23 h)", time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC), time.Date(2026, 3, 9, 7, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.True(t, l.DayReset.Next(tt.at).Equal(tt.want), "got %v", l.DayReset.Next(tt.at).UTC())
		})
	}

	utc := capacity.Limits{RequestsPerDay: 1000, DayReset: capacity.DayBoundary{Location: time.UTC}}
	require.Equal(t, utc, accounting.ProfileDayReset(utc, gemini), "an explicit boundary is kept")
	openai, _ := accounting.ProfileFor(capacity.OpenAI)
	require.Equal(t, capacity.DayBoundary{}, accounting.ProfileDayReset(capacity.Limits{RequestsPerDay: 1}, openai).DayReset)
}

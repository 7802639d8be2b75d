package headers

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

var (
	headerText      = testenv.HeaderText
	parseHeaderText = testenv.ParseHeaderText
)

// FuzzParseHeaders checks that arbitrary headers never panic and that every
// reported field is within its contract.
func FuzzParseHeaders(f *testing.F) {
	for _, fc := range loadHeaderFixtures(f) {
		f.Add(string(fc.Provider), headerText(fc.Headers), int64(0))
	}
	f.Add("anthropic", "retry-after: Thu, 15 Oct 2026 12:00:30 GMT\nretry-after-ms: 1.5", int64(-1))
	f.Add("unknown", "x-ratelimit-reset-requests: 1d2h\nanthropic-ratelimit-tokens-reset: 2026-10-15T12:00:00.5Z", int64(3600))
	f.Fuzz(func(t *testing.T, provider, text string, skew int64) {
		now := fixtureTime.Add(time.Duration(skew) * time.Second)
		obs := Parse(capacity.Provider(provider), parseHeaderText(text), now)
		for dim, d := range obs.Dims {
			if d.HasLimit && d.Limit <= 0 {
				t.Fatalf("%v: limit %d reported", capacity.Dimension(dim), d.Limit)
			}
			if d.HasRemaining && d.Remaining < 0 {
				t.Fatalf("%v: remaining %d reported", capacity.Dimension(dim), d.Remaining)
			}
			if d.HasReset != (d.ResetIn > 0) {
				t.Fatalf("%v: reset %v (has %v)", capacity.Dimension(dim), d.ResetIn, d.HasReset)
			}
			if !d.HasLimit && d.Limit != 0 || !d.HasRemaining && d.Remaining != 0 {
				t.Fatalf("%v: value without flag: %+v", capacity.Dimension(dim), d)
			}
		}
		if obs.RetryAfter < 0 {
			t.Fatalf("negative retry-after %v", obs.RetryAfter)
		}
		if obs.Provider != capacity.Provider(provider) {
			t.Fatalf("provider %q, want %q", obs.Provider, provider)
		}
	})
}

// FuzzParseDuration checks ParseDuration against time.ParseDuration on the
// inputs both accept.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"12ms", "57.5s", "6m0s", "23h47m36.648s", "1s", "2d", ".5s", "1.s", "9223372036s", "5µs"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := ParseDuration(s)
		if !ok {
			if got != 0 {
				t.Fatalf("ParseDuration(%q) = %v, false", s, got)
			}
			return
		}
		if got < 0 {
			t.Fatalf("ParseDuration(%q) = %v", s, got)
		}
		if strings.Contains(s, "d") || got > 1<<62 {
			return
		}
		want, err := time.ParseDuration(s)
		if err != nil || want != got {
			t.Fatalf("ParseDuration(%q) = %v; time.ParseDuration = %v, %v", s, got, want, err)
		}
	})
}

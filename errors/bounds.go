package errors

import (
	"maps"
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Bounds on the waits and resets providers report. A provider's wait is
// trusted only as far as its kind can mean: past the bound of its kind it is
// cut to the bound. One bad response (a 429 with retry-after: 3153600000, a
// reset read against a wrong date header) must not block a scope for every
// worker for years. Verdict.RetryAfter and Verdict.ResetAt are always within
// these bounds.
const (
	// MaxPerMinuteWait bounds a wait on a per-minute budget (requests or
	// tokens per minute, a Gemini quota id "...PerMinute..."): the bucket
	// refills fully within its minute. A rate limit on a per-minute budget
	// asking for longer waits this long and stays RateLimited (with the
	// default Classifier.MaxRateLimitWait).
	MaxPerMinuteWait = time.Minute
	// MaxDailyReset bounds the wait or reset of a per-day budget: Gemini's
	// daily quotas reset at the next midnight Pacific (25 hours away at most,
	// on the day daylight saving time ends), OpenAI's daily limits roll over
	// 24 hours.
	MaxDailyReset = 25 * time.Hour
	// MaxStatedReset bounds a reset a usage or spend limit states as a date
	// (Anthropic's "You will regain access on 2026-11-01 at 00:00 UTC"):
	// such limits are monthly, so they reset within 31 days, the longest
	// block a store keeps.
	MaxStatedReset = capacity.MaxBlock
	// MaxUnknownWait bounds a wait whose kind nothing identifies: a rate
	// limit with no known budget, a retry-after on an overload or server
	// error. It is the interceptor's DefaultQuotaBlockUnknown: a wait of
	// unknown meaning blocks no longer than no stated wait would.
	MaxUnknownWait = time.Hour
	// MaxDateSkew is how far a response's date header may be from the local
	// clock and still be the reference for times the response states
	// (retry-after as an HTTP-date, Anthropic's reset timestamps, a usage
	// limit's date). A date header further off is wrong, and those times
	// are read against the local clock instead.
	MaxDateSkew = 10 * time.Minute
)

// observe parses h's rate-limit headers as of now and returns the time the
// times they state were read against: the date header if it is within
// MaxDateSkew of now, else now. An implausible date header is left out of
// the observation (Observation.Date is zero).
func observe(p capacity.Provider, h http.Header, now time.Time) (capacity.Observation, time.Time) {
	obs := capacity.ParseHeaders(p, h, now)
	if obs.Date.IsZero() {
		return obs, now
	}
	if obs.Date.Sub(now).Abs() <= MaxDateSkew {
		return obs, obs.Date
	}
	h = maps.Clone(h)
	delete(h, "Date")
	delete(h, "date")
	return capacity.ParseHeaders(p, h, now), now
}

// rateLimitBound is the longest wait a rate limit can mean, by the budget
// that binds: MaxDailyReset for a per-day budget (a Gemini quota id of a
// daily window, or a per-day dimension), MaxPerMinuteWait for a per-minute
// one, else MaxUnknownWait.
func rateLimitBound(v *Verdict, window quotaWindow) time.Duration {
	switch {
	case window == windowDay, v.HasDimension && v.Dimension.PerDay():
		return MaxDailyReset
	case window == windowMinute, v.HasDimension && v.Dimension.PerMinute():
		return MaxPerMinuteWait
	}
	return MaxUnknownWait
}

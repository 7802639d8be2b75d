package errors

import (
	"maps"
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/headers"
)

// Bounds on the waits and resets providers report. A rate limit's stated
// wait longer than its kind of budget can mean is not a rate limit: the
// budget is spent, and the verdict is QuotaExhausted (ReasonWaitExceedsBound)
// with ResetAt at the stated time, cut to the longest reset of that kind.
// One bad response (a 429 with retry-after: 3153600000, a reset read against
// a wrong date header) must not block a scope for every worker for years, so
// Verdict.RetryAfter and Verdict.ResetAt are always within these bounds.
const (
	// MaxPerMinuteWait bounds a wait on a per-minute budget (requests or
	// tokens per minute, a Gemini quota id "...PerMinute..."): the bucket
	// refills fully within its minute, and a provider that also counts the
	// requests it refuses (OpenAI does) can run it into debt of at most a
	// bucket, paid off in the minute before. A rate limit on a per-minute
	// budget stating a longer wait (beyond a second of rounding) is
	// exhaustion, with ResetAt at most MaxDailyReset away: a per-minute
	// limit stating a day is a daily quota spent behind it.
	MaxPerMinuteWait = 2 * time.Minute
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
	// waitRounding is how far a stated wait may exceed the bound of its
	// kind and still be a rate-limit wait: providers state whole seconds,
	// and reset times are read against a date header of whole seconds.
	waitRounding = time.Second
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
	obs := headers.Parse(p, h, now)
	if obs.Date.IsZero() {
		return obs, now
	}
	if obs.Date.Sub(now).Abs() <= MaxDateSkew {
		return obs, obs.Date
	}
	h = maps.Clone(h)
	delete(h, "Date")
	delete(h, "date")
	return headers.Parse(p, h, now), now
}

// kindBounds are the bounds of one kind of budget: wait, the longest wait
// a rate limit on it can mean; reset, the longest it can be spent for.
type kindBounds struct{ wait, reset time.Duration }

// rateLimitBounds are the bounds of the budget a rate limit binds on: a
// per-day budget (a Gemini quota id of a daily window, or a per-day
// dimension) waits and resets within MaxDailyReset; a per-minute one waits
// MaxPerMinuteWait but, spent for the day behind it (a deployment's daily
// quota), resets within MaxDailyReset; one nothing identifies, within
// MaxUnknownWait.
func rateLimitBounds(v *Verdict, window quotaWindow) kindBounds {
	switch {
	case window == windowDay, v.HasDimension && v.Dimension.PerDay():
		return kindBounds{wait: MaxDailyReset, reset: MaxDailyReset}
	case window == windowMinute, v.HasDimension && v.Dimension.PerMinute():
		return kindBounds{wait: MaxPerMinuteWait, reset: MaxDailyReset}
	}
	return kindBounds{wait: MaxUnknownWait, reset: MaxUnknownWait}
}

package errors

import (
	"net/http"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/headers"
)

// decide classifies a failed response from its evidence, strongest first:
// structured fields (status, code, type, Google details, headers), then the
// message. now is the caller's clock; waits stated as times are read
// relative to the response's date header, unless it is more than
// MaxDateSkew off. Every wait and reset is cut to the bound of its kind
// (MaxPerMinuteWait, MaxDailyReset, MaxStatedReset, MaxUnknownWait); a rate
// limit's wait longer than its kind can mean is exhaustion.
func (c Classifier) decide(p capacity.Provider, ev *evidence, now time.Time) Verdict {
	if p == "" {
		p = ev.sdk
	}
	v := Verdict{Provider: p, Status: ev.status, Code: sanitizeToken(ev.providerCode())}
	var ref time.Time
	v.Observation, ref = observe(p, ev.header, now)
	scan := ev.message
	if len(scan) > maxScanLen {
		scan = scan[:maxScanLen]
	}
	msg := strings.ToLower(scan)
	v.Message = sanitizeMessage(ev.message)

	v.Class, v.Reason = structuredClass(ev, msg)
	if v.Class == RateLimited {
		c.rateLimit(&v, ev, msg, ref)
	} else {
		// Nothing says which budget an overload's or a server error's wait
		// is for.
		v.RetryAfter = min(providerWait(&v, ev, msg, ref), MaxUnknownWait)
	}
	if v.Class == QuotaExhausted && v.Reason == ReasonUsageLimit {
		if at, ok := regainAccessAt(msg); ok && at.After(ref) {
			v.ResetAt = now.Add(min(at.Sub(ref), MaxStatedReset))
		}
	} else if v.Class == QuotaExhausted && v.Reason != ReasonBilling {
		c.quotaReset(&v, ref, now)
	}
	v.Retryable = v.Class.Retryable()
	return v
}

// structuredClass picks the class from the structured fields, consulting the
// message only where they leave the question open. RateLimited is refined by
// rateLimit.
func structuredClass(ev *evidence, msg string) (Class, Reason) {
	code, typ, st := ev.code, ev.typ, ev.gstatus
	switch {
	case isBadKeyReason(ev.google.reason):
		return BadCredential, ""
	case ev.status == http.StatusUnauthorized, typ == "authentication_error",
		code == "invalid_api_key", code == "invalid_authentication", st == "UNAUTHENTICATED":
		return BadCredential, ""
	case ev.status == http.StatusPaymentRequired, typ == "billing_error", typ == "insufficient_quota",
		code == "insufficient_quota", code == "billing_hard_limit_reached", code == "billing_not_active":
		return QuotaExhausted, ReasonBilling
	case ev.status == http.StatusForbidden, typ == "permission_error", st == "PERMISSION_DENIED":
		return NoAccess, ""
	case ev.status == http.StatusNotFound, typ == "not_found_error", code == "model_not_found", st == "NOT_FOUND":
		return NoAccess, ""
	case ev.status == http.StatusRequestEntityTooLarge, typ == "request_too_large":
		return ContextTooLong, ReasonRequestTooLarge
	case code == "context_length_exceeded", code == "string_above_max_length":
		return ContextTooLong, ReasonContextLength
	case ev.status == 529, typ == "overloaded_error":
		return Overloaded, ""
	case ev.status == http.StatusTooManyRequests, typ == "rate_limit_error",
		code == "rate_limit_exceeded", st == "RESOURCE_EXHAUSTED":
		return RateLimited, ""
	case ev.status == http.StatusRequestTimeout, ev.status == http.StatusConflict,
		typ == "timeout_error", st == "DEADLINE_EXCEEDED", st == "ABORTED":
		return Transient, ""
	case ev.status >= 500, typ == "api_error", typ == "server_error", st == "UNAVAILABLE", st == "INTERNAL":
		if saysOverloaded(msg) {
			return Overloaded, ""
		}
		return Transient, ""
	case ev.status >= 400, typ == "invalid_request_error", st == "INVALID_ARGUMENT", st == "FAILED_PRECONDITION":
		switch {
		case saysContextTooLong(msg):
			return ContextTooLong, ReasonContextLength
		case saysBilling(msg):
			return QuotaExhausted, ReasonBilling
		case strings.Contains(msg, "api usage limits"):
			// Anthropic's workspace spend limit: "You have reached your
			// specified API usage limits. You will regain access on
			// 2026-11-01 at 00:00 UTC."
			return QuotaExhausted, ReasonUsageLimit
		case strings.Contains(msg, "location is not supported"):
			return NoAccess, ""
		}
		return BadRequest, ""
	}
	return Unknown, ""
}

// rateLimit refines a rate-limit verdict: the binding dimension and quota,
// the wait, and whether it is really exhaustion (a daily quota, or a wait
// longer than a rate limit of its kind can mean) or a request no wait can
// admit. Waits are read against ref.
func (c Classifier) rateLimit(v *Verdict, ev *evidence, msg string, ref time.Time) {
	if saysRequestTooLarge(msg) {
		// The one documented case where the message overrides the
		// structured fields: the request exceeds the whole bucket.
		v.Class, v.Reason = ContextTooLong, ReasonExceedsRateLimitBucket
		v.Limit, _ = messageNumber(msg, "limit ")
		v.Requested, _ = messageNumber(msg, "requested ")
		v.Dimension, v.HasDimension = rateLimitDimension(v, ev, msg)
		return
	}
	window := windowUnknown
	if q := ev.google.quota; q.id != "" {
		v.QuotaID = q.id
		window = q.window
		v.Dimension, v.HasDimension = q.dim, q.hasDim
	}
	daily := window == windowDay
	if !v.HasDimension {
		v.Dimension, v.HasDimension = rateLimitDimension(v, ev, msg)
	}
	v.Limit, _ = messageNumber(msg, "limit ")
	v.Requested, _ = messageNumber(msg, "requested ")
	stated := providerWait(v, ev, msg, ref)
	bounds := rateLimitBounds(v, window)
	// A per-day limit that refills continuously (OpenAI's: 10,000 RPD frees
	// a request every 8.64 s) states a short wait: that is a rate limit on
	// the daily dimension, not a spent quota. A daily quota that resets at a
	// boundary (Gemini's quota id says so) is exhausted until then.
	rolling := stated > 0 && stated <= c.maxRateLimitWait()
	switch {
	case daily || v.HasDimension && v.Dimension.PerDay() && !rolling:
		v.Class, v.Reason = QuotaExhausted, ReasonDailyQuota
		v.RetryAfter = min(stated, bounds.reset)
	case stated > min(bounds.wait, c.maxRateLimitWait())+waitRounding:
		// Longer than a rate limit of its kind can mean: the budget is
		// spent (an Azure OpenAI deployment out of quota for the day
		// answers a per-minute limit with "retry after 86400 seconds").
		v.Class, v.Reason = QuotaExhausted, ReasonWaitExceedsBound
		v.RetryAfter = min(stated, bounds.reset)
	default:
		v.RetryAfter = min(stated, bounds.wait)
	}
}

// rateLimitDimension finds the binding budget of a rate limit: OpenAI's
// error.type ("tokens", "requests"), else the dimension the headers report
// spent (remaining 0; the latest reset if several), else the message. A
// message naming a daily budget of the same kind refines a per-minute one.
func rateLimitDimension(v *Verdict, ev *evidence, msg string) (capacity.Dimension, bool) {
	d, ok := capacity.Dimension(0), false
	switch ev.typ {
	case "tokens":
		d, ok = capacity.Tokens, true
	case "requests":
		d, ok = capacity.Requests, true
	case "input_tokens":
		d, ok = capacity.InputTokens, true
	case "output_tokens":
		d, ok = capacity.OutputTokens, true
	}
	if !ok {
		d, ok = spentDimension(&v.Observation)
	}
	if !ok {
		return messageDimension(msg)
	}
	if saysPerDay(msg) {
		switch d {
		case capacity.Requests:
			d = capacity.RequestsPerDay
		case capacity.Tokens, capacity.InputTokens, capacity.OutputTokens:
			d = capacity.TokensPerDay
		}
	}
	return d, true
}

// spentDimension returns the dimension whose headers report nothing
// remaining; of several, the one that resets last binds longest.
func spentDimension(obs *capacity.Observation) (capacity.Dimension, bool) {
	best, found := capacity.Dimension(0), false
	for i, d := range obs.Dims {
		if !d.HasRemaining || d.Remaining != 0 {
			continue
		}
		if !found || d.ResetIn > obs.Dims[best].ResetIn {
			best, found = capacity.Dimension(i), true
		}
	}
	return best, found
}

// providerWait is the wait the provider asked for, strongest evidence first:
// retry-after-ms, retry-after, the binding dimension's reset header, Gemini's
// RetryInfo.retryDelay, the message's "try again in". Zero if none.
func providerWait(v *Verdict, ev *evidence, msg string, ref time.Time) time.Duration {
	if w := v.Observation.RetryAfter; w > 0 {
		return w
	}
	if v.HasDimension && int(v.Dimension) < len(v.Observation.Dims) {
		if d := v.Observation.Dims[v.Dimension]; d.HasReset && d.ResetIn > 0 {
			return d.ResetIn
		}
	}
	if w, ok := headers.ParseReset(ev.google.retryDelay, time.Second, ref); ok {
		return w
	}
	if w, ok := messageWait(msg, ref); ok {
		return w
	}
	return 0
}

// quotaReset sets ResetAt of an exhausted quota: now plus the provider's
// wait (already bounded by rateLimit), or for a Gemini daily quota without
// one, its next daily reset (at most MaxDailyReset away).
func (c Classifier) quotaReset(v *Verdict, ref, now time.Time) {
	wait := v.RetryAfter
	if wait <= 0 && v.Reason == ReasonDailyQuota && v.Provider == capacity.Gemini {
		wait = min(c.geminiDayReset().Next(ref).Sub(ref), MaxDailyReset)
	}
	if wait > 0 {
		v.ResetAt = now.Add(wait)
	}
}

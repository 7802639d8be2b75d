package errors

import (
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Reason refines a class with what exactly was exceeded or refused.
type Reason string

// Reasons a Verdict may carry; empty when the class says it all.
const (
	// ReasonBilling: a billing quota or credit balance is spent; no reset
	// time, a person must act.
	ReasonBilling Reason = "billing"
	// ReasonUsageLimit: a spend limit set on the account (Anthropic's "API
	// usage limits") is reached until Verdict.ResetAt, when stated.
	ReasonUsageLimit Reason = "usage_limit"
	// ReasonDailyQuota: a per-day quota is spent until Verdict.ResetAt.
	ReasonDailyQuota Reason = "daily_quota"
	// ReasonKeyQuota: the call's fairness key has spent the tokens it may
	// use per day on the scope (capacity.Fairness.TokensPerDay) until
	// Verdict.ResetAt, the end of the scope's day window. The scope is not
	// blocked: other keys' calls go on.
	ReasonKeyQuota Reason = "key_quota"
	// ReasonSpendCap: the call would take its tenant (fairness key) or its
	// connection (credential) past its spend cap for the day
	// (spend.Caps) until Verdict.ResetAt, the end of the scope's
	// day window; Verdict.Code says which cap: SpendCapTenant or
	// SpendCapConnection. Nothing reached the provider and the scope is
	// not blocked.
	ReasonSpendCap Reason = "spend_cap"
	// ReasonWaitExceedsBound: a rate limit stated a wait longer than a rate
	// limit of its kind can mean (a per-minute budget's minute, beyond a
	// second of rounding) or than Classifier.MaxRateLimitWait: the budget is
	// spent until Verdict.ResetAt, the stated time cut to the longest reset
	// of its kind (MaxDailyReset for a per-minute or per-day budget,
	// MaxUnknownWait for one nothing identifies).
	ReasonWaitExceedsBound Reason = "wait_exceeds_bound"
	// ReasonExceedsRateLimitBucket: one request is larger than a whole
	// per-minute budget (OpenAI "Request too large"); waiting never helps.
	ReasonExceedsRateLimitBucket Reason = "exceeds_rate_limit_bucket"
	// ReasonContextLength: the input is longer than the model's context.
	ReasonContextLength Reason = "context_length_exceeded"
	// ReasonRequestTooLarge: the request body is larger than the API accepts
	// (413).
	ReasonRequestTooLarge Reason = "request_too_large"
	// ReasonPoolExhausted: every key of a key pool (interceptor
	// Options.Pools) is out: refused, without access to the model, or out
	// of quota. Details.Scope names the pool (its name in the credential
	// place), the message each key and why; a QuotaExhausted one carries
	// the earliest ResetAt of the keys out of quota.
	ReasonPoolExhausted Reason = "pool_exhausted"
)

// The codes of a ReasonSpendCap verdict (Verdict.Code, Details.Code): which
// cap refused the call.
const (
	SpendCapTenant     = "tenant"
	SpendCapConnection = "connection"
)

// Verdict is the classification of one provider failure with the evidence
// that decided it. Fields the evidence did not state are zero.
type Verdict struct {
	// Class is what the failure is; Retryable is Class.Retryable().
	Class     Class
	Retryable bool
	// Reason refines Class (ReasonDailyQuota, ReasonBilling, ...).
	Reason Reason
	// Provider is the provider the failure came from.
	Provider capacity.Provider
	// Status is the HTTP status; zero for failures without a response.
	Status int
	// Code is the provider's own code: OpenAI error.code (else error.type),
	// Anthropic error.type, Gemini ErrorInfo.reason (else error.status).
	Code string
	// QuotaID is Gemini's QuotaFailure quotaId of the binding violation.
	QuotaID string
	// Dimension is the budget that binds, when HasDimension.
	Dimension    capacity.Dimension
	HasDimension bool
	// RetryAfter is the wait the provider asked for, from the strongest
	// evidence: retry-after-ms, retry-after, the binding dimension's reset
	// header, Gemini's RetryInfo.retryDelay, the message's "try again in".
	// Zero if none (zero and negative values count as absent). Every form
	// headers.ParseReset reads is read. A RateLimited verdict's is at most
	// the bound of its kind (MaxPerMinuteWait, MaxDailyReset or
	// MaxUnknownWait); a QuotaExhausted one's is the wait until ResetAt.
	RetryAfter time.Duration
	// ResetAt is when an exhausted quota comes back, on the caller's clock
	// (now plus the provider's wait, which is read relative to the
	// response's date header unless that is more than MaxDateSkew off).
	// Zero if unknown; else at most MaxDailyReset after now, or
	// MaxStatedReset for a usage limit's stated date.
	ResetAt time.Time
	// Limit and Requested are the budget and the request's size when the
	// provider stated them (OpenAI "Limit 30000, Requested 31538").
	Limit, Requested int64
	// Message is the provider's message, masked and shortened (see
	// MaskSecrets); safe for logs and workflow history.
	Message string
	// Observation is what the response's rate-limit headers said, for
	// Store.Observe. A date header more than MaxDateSkew from the caller's
	// clock is left out (Date is zero) and the headers' times are read
	// against the caller's clock.
	Observation capacity.Observation

	// ctxErr is the context error of a Canceled verdict.
	ctxErr error
}

// Dim returns the binding dimension, if known.
func (v Verdict) Dim() (capacity.Dimension, bool) { return v.Dimension, v.HasDimension }

// String returns a one-line, secret-free summary, the message of the
// ApplicationError built from v.
func (v Verdict) String() string {
	var b strings.Builder
	b.WriteString("tollgate: ")
	if v.Provider != "" {
		b.WriteString(string(v.Provider))
		b.WriteByte(' ')
	}
	b.WriteString(v.Class.String())
	var parts []string
	if v.Status != 0 {
		parts = append(parts, "HTTP "+strconv.Itoa(v.Status))
	}
	if v.Code != "" {
		parts = append(parts, sanitizeToken(v.Code))
	}
	if v.Reason != "" && string(v.Reason) != v.Code {
		parts = append(parts, string(v.Reason))
	}
	if v.HasDimension {
		parts = append(parts, v.Dimension.String())
	}
	if v.QuotaID != "" {
		parts = append(parts, "quota "+sanitizeToken(v.QuotaID))
	}
	if v.RetryAfter > 0 {
		parts = append(parts, "retry after "+v.RetryAfter.String())
	}
	if !v.ResetAt.IsZero() {
		parts = append(parts, "resets "+v.ResetAt.UTC().Format(time.RFC3339))
	}
	if len(parts) > 0 {
		b.WriteString(" (" + strings.Join(parts, ", ") + ")")
	}
	if v.Message != "" {
		b.WriteString(": ")
		b.WriteString(v.Message)
	}
	return b.String()
}

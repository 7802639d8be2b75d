package testsuite

import (
	"net/http"
	"slices"
	"sync"
	"time"
)

// Cause says why the fake provider did not answer a request with success.
type Cause string

// Causes recorded in Entry.Cause.
const (
	// CauseNone marks a successful request.
	CauseNone Cause = ""
	// CauseRequests is a 429 from the request bucket (RPM).
	CauseRequests Cause = "requests"
	// CauseTokens is a 429 from OpenAI's token bucket (TPM).
	CauseTokens Cause = "tokens"
	// CauseInputTokens is a 429 from Anthropic's input token bucket (ITPM).
	CauseInputTokens Cause = "input_tokens"
	// CauseOutputTokens is a 429 from Anthropic's output token bucket (OTPM).
	CauseOutputTokens Cause = "output_tokens"
	// CauseConcurrency is a 429 because MaxConcurrent requests are in flight.
	CauseConcurrency Cause = "concurrency"
	// CauseTooLarge is a 429 for a request whose token charge exceeds the
	// whole per-minute token limit: waiting can never help.
	CauseTooLarge Cause = "request_too_large"
	// CauseDailyQuota is a daily quota refusal: OpenAI 429
	// insufficient_quota, Anthropic 400 "API usage limits".
	CauseDailyQuota Cause = "daily_quota"
	// CauseInjectedRateLimit is a 429 injected by Faults.RateLimited.
	CauseInjectedRateLimit Cause = "injected_rate_limit"
	// CauseOverloaded is an injected overload: Anthropic 529, OpenAI 503.
	CauseOverloaded Cause = "overloaded"
	// CauseServerError is an injected 500.
	CauseServerError Cause = "server_error"
	// CauseConnReset is a connection closed without an answer after the
	// request was admitted and charged (Faults.ConnReset).
	CauseConnReset Cause = "connection_reset"
	// CauseCanceled is a request whose client went away while it ran; it was
	// charged.
	CauseCanceled Cause = "canceled"
	// CauseGarbage is a request admitted, charged and answered with status
	// 200 and a body that is not an answer (Faults.Garbage).
	CauseGarbage Cause = "garbage"
	// CauseUnauthorized is a 401 for a missing, unknown or revoked key.
	CauseUnauthorized Cause = "unauthorized"
	// CauseUnknownModel is a 404 for a model the provider does not serve.
	CauseUnknownModel Cause = "unknown_model"
	// CauseContextLength is a 400 for a prompt (plus max_tokens) over the
	// model's context window.
	CauseContextLength Cause = "context_length"
	// CauseBadRequest is a 400 (or 413, 404 path, 405 method) for a request
	// the provider cannot parse or accept.
	CauseBadRequest Cause = "bad_request"
)

// rateLimited reports whether c is a retryable 429 computed from a bucket.
func (c Cause) rateLimited() bool {
	switch c {
	case CauseRequests, CauseTokens, CauseInputTokens, CauseOutputTokens, CauseConcurrency:
		return true
	}
	return false
}

// causeOf returns the rate-limit cause of bucket dimension d.
func causeOf(d Dimension) Cause {
	switch d {
	case Requests:
		return CauseRequests
	case Tokens:
		return CauseTokens
	case InputTokens:
		return CauseInputTokens
	case OutputTokens:
		return CauseOutputTokens
	}
	return CauseNone
}

// Usage is the usage the fake provider reported in a response body.
type Usage struct {
	// InputTokens counts every prompt token, cached or not. (Anthropic's wire
	// input_tokens is InputTokens − CacheReadTokens − CacheCreationTokens.)
	InputTokens int64
	// OutputTokens is the length of the answer.
	OutputTokens int64
	// CacheReadTokens are prompt tokens read from Anthropic's prompt cache.
	CacheReadTokens int64
	// CacheCreationTokens are prompt tokens written to Anthropic's prompt cache.
	CacheCreationTokens int64
}

// Entry is the record of one request: what the fake provider charged and how
// it answered.
type Entry struct {
	// Seq numbers requests in arrival order, from 1.
	Seq uint64
	// Provider is the wire format of the endpoint called.
	Provider Provider
	// Scope is the model and key of the request (Key as sent, even if unknown).
	Scope Scope
	// Arrival is when the provider read the request, on its clock.
	Arrival time.Time
	// Done is when it answered (or closed the connection).
	Done time.Time
	// Latency is Done − Arrival.
	Latency time.Duration
	// Status is the HTTP status sent; 0 if the connection was closed instead.
	Status int
	// Cause says why the request did not succeed; CauseNone on success.
	Cause Cause
	// Admitted reports whether the request passed admission and held budget.
	Admitted bool
	// Charged is what was charged at Arrival. A refused request carries the
	// one request it costs.
	Charged Charges
	// Settled is what was charged at Done (Anthropic output tokens).
	Settled Charges
	// Remaining is every limited dimension's remaining budget right after the
	// admission decision (whole tokens, never negative).
	Remaining Charges
	// Usage is the usage sent in the response body.
	Usage Usage
	// Direct marks traffic sent with FakeProvider.Spend, outside HTTP.
	Direct bool
	// Tag is the request's TagHeader as sent, cut to MaxTagLength bytes;
	// empty if absent.
	Tag string
	// ClientRequestID is the request's X-Client-Request-Id header (OpenAI's
	// name for a client's own request id), at most MaxClientRequestID bytes
	// of it; "" if it had none. A client that names each request there can
	// match the record with its own calls.
	ClientRequestID string
	// BadHeaders marks an answer whose rate-limit headers were garbled
	// (Faults.BadHeaders).
	BadHeaders bool
}

// TagHeader is the request header the record keeps as Entry.Tag: a test's
// label for the request (a tenant, a part of its workload), so the record
// can be split by it. No provider knows it; the fake provider does nothing
// else with it. Put names in it, never prompt text.
const TagHeader = "X-Testsuite-Tag"

// MaxTagLength is the longest Entry.Tag, in bytes.
const MaxTagLength = 128

// tagOf returns the TagHeader of h, cut to MaxTagLength bytes.
func tagOf(h http.Header) string {
	tag := h.Get(TagHeader)
	if len(tag) > MaxTagLength {
		tag = tag[:MaxTagLength]
	}
	return tag
}

// MaxClientRequestID is the most bytes of a request's X-Client-Request-Id
// header the record keeps.
const MaxClientRequestID = 512

// Cost returns what e was charged in dimension d in all: Charged + Settled.
func (e Entry) Cost(d Dimension) int64 { return e.Charged[d] + e.Settled[d] }

// recorder is the append-only record of entries.
type recorder struct {
	mu      sync.Mutex
	off     bool
	entries []Entry
}

func (r *recorder) add(e Entry) {
	if r.off {
		return
	}
	r.mu.Lock()
	r.entries = append(r.entries, e)
	r.mu.Unlock()
}

// snapshot returns the entries that match keep, in Seq order.
func (r *recorder) snapshot(keep func(*Entry) bool) []Entry {
	r.mu.Lock()
	out := make([]Entry, 0, len(r.entries))
	for i := range r.entries {
		if keep == nil || keep(&r.entries[i]) {
			out = append(out, r.entries[i])
		}
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Entry) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	return out
}

func (r *recorder) reset() {
	r.mu.Lock()
	r.entries = nil
	r.mu.Unlock()
}

package capacity

import (
	"errors"
	"fmt"
	"time"
)

// Demand is the estimated cost of one model call, known before dispatch.
type Demand struct {
	// Requests is the number of requests (0 means 1).
	Requests int64
	// InputTokens is the estimated input tokens, excluding tokens expected to
	// be read from the provider's prompt cache (CachedInputTokens).
	InputTokens int64
	// CachedInputTokens is the estimated input read from the prompt cache.
	CachedInputTokens int64
	// InputEstimated reports that InputTokens and CachedInputTokens are a
	// rough estimate (such as bytes / 3), which the gate may calibrate by
	// the ratio of actual to estimated input it learned for the scope
	// (CalibrateInput). False (the default): an exact or tokenizer count,
	// used as it is.
	InputEstimated bool
	// OutputTokens is the output to reserve: the expected completion length
	// including reasoning/thinking tokens. If zero, MaxTokens is reserved.
	OutputTokens int64
	// MaxTokens is the max_tokens (max_completion_tokens) the request sends,
	// including any reasoning/thinking budget. Zero if unset.
	MaxTokens int64
}

// MaxDemand is the largest value a Demand field may hold: a trillion
// tokens, beyond any request a provider accepts, and small enough that a
// profile adding every field of a Demand cannot overflow.
const MaxDemand = 1 << 40

// ErrInvalidDemand is returned (wrapped) by Demand.Validate; it wraps
// ErrInvalidRequest.
var ErrInvalidDemand = fmt.Errorf("%w: invalid demand", ErrInvalidRequest)

// Validate reports whether d can be charged: every field from 0 to
// MaxDemand. It refuses a negative field even where a profile's sum would
// hide it (InputTokens -5000 with CachedInputTokens 5000 charges OpenAI
// nothing), so it runs before any profile combines the fields.
func (d Demand) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"Requests", d.Requests},
		{"InputTokens", d.InputTokens},
		{"CachedInputTokens", d.CachedInputTokens},
		{"OutputTokens", d.OutputTokens},
		{"MaxTokens", d.MaxTokens},
	} {
		if f.v < 0 || f.v > MaxDemand {
			errs = append(errs, fmt.Errorf("%w: %s is %d; want 0 to %d", ErrInvalidDemand, f.name, f.v, int64(MaxDemand)))
		}
	}
	return errors.Join(errs...)
}

func (d Demand) requests() int64 {
	if d.Requests <= 0 {
		return 1
	}
	return d.Requests
}

func (d Demand) outputReserve() int64 {
	if d.OutputTokens > 0 {
		return d.OutputTokens
	}
	return d.MaxTokens
}

// Usage is what a call actually consumed, as the provider reported it.
type Usage struct {
	// InputTokens is the uncached input (OpenAI: prompt_tokens minus
	// cached_tokens; Anthropic: input_tokens; Gemini: promptTokenCount minus
	// cachedContentTokenCount).
	InputTokens int64
	// CacheReadInputTokens is input served from the prompt cache.
	CacheReadInputTokens int64
	// CacheCreationInputTokens is input written to the cache (Anthropic).
	CacheCreationInputTokens int64
	// OutputTokens is the completion as reported (OpenAI completion_tokens and
	// Anthropic output_tokens already include reasoning/thinking).
	OutputTokens int64
	// ExtraReasoningTokens is reasoning reported apart from OutputTokens
	// (Gemini thoughtsTokenCount); it counts as output.
	ExtraReasoningTokens int64
}

// Outcome says how a call that reached the provider ended.
type Outcome int

const (
	// Completed: the provider answered with usage.
	Completed Outcome = iota
	// Rejected: the provider refused the call (a 4xx such as 429). Each
	// profile documents what a rejected call still costs.
	Rejected
	// Unknown: the request was sent and the answer was lost (client timeout,
	// connection reset after sending). It settles at the full reservation.
	Unknown
)

// Profile turns a Demand into per-dimension charges at admission and the
// actual usage into the final charges at settlement. Profiles are pure
// functions: the Store never sees them.
type Profile interface {
	// Name identifies the profile ("openai", "anthropic", "gemini").
	Name() string
	// Charges returns what a call of demand d reserves in every dimension.
	Charges(d Demand) Charges
	// Settle returns the final charges of a call that reserved reserved, given
	// its outcome and actual usage. Above the reservation is debt.
	Settle(d Demand, reserved Charges, o Outcome, u Usage) Charges
}

// ProfileFor returns the default accounting profile of provider p, or
// (nil, false) if tollgate has none.
func ProfileFor(p Provider) (Profile, bool) {
	switch p {
	case OpenAI:
		return OpenAIProfile{}, true
	case Anthropic:
		return AnthropicProfile{}, true
	case Gemini:
		return GeminiProfile{}, true
	}
	return nil, false
}

// OpenAITokenRule says how OpenAI charges the token budget at admission.
type OpenAITokenRule int

const (
	// InputPlusMaxTokens charges input + max_tokens up front. OpenAI's rate
	// limit guide: "your rate limit is calculated as the maximum of max_tokens
	// and the estimated number of tokens based on the character count of your
	// request" is the older wording; community measurements of current
	// x-ratelimit-remaining-tokens show input + max_tokens. This is the default.
	InputPlusMaxTokens OpenAITokenRule = iota
	// MaxOfMaxTokensAndEstimate charges max(max_tokens, input estimate), the
	// documented wording of the rate-limit guide.
	MaxOfMaxTokensAndEstimate
)

// OpenAIProfile is OpenAI's accounting: RPM counts every request; TPM is
// charged at admission from max_tokens (per TokenRule) and unused output is
// not refunded (OpenAI rate-limit guide, "max_tokens ... counts toward your
// TPM"); usage above that is debt. Cached input still counts toward TPM.
// Input and output buckets, when configured, get input and the output reserve.
type OpenAIProfile struct {
	TokenRule OpenAITokenRule
}

// Name returns "openai".
func (OpenAIProfile) Name() string { return string(OpenAI) }

func (p OpenAIProfile) tokenCharge(d Demand) int64 {
	in := d.InputTokens + d.CachedInputTokens
	out := d.outputReserve()
	switch p.TokenRule {
	case MaxOfMaxTokensAndEstimate:
		if d.MaxTokens > 0 {
			return max(d.MaxTokens, in)
		}
		return in + out
	default:
		if d.MaxTokens > 0 {
			return in + d.MaxTokens
		}
		return in + out
	}
}

// Charges returns OpenAI's admission charges.
func (p OpenAIProfile) Charges(d Demand) Charges {
	var c Charges
	tok := p.tokenCharge(d)
	c[Requests] = d.requests()
	c[InputTokens] = d.InputTokens + d.CachedInputTokens
	c[OutputTokens] = d.outputReserve()
	c[Tokens] = tok
	c[RequestsPerDay] = d.requests()
	c[TokensPerDay] = tok
	c[InFlight] = 1
	return c
}

// Settle: OpenAI does not refund unused max_tokens, so each token dimension
// settles at max(reserved, actual). A rejected call keeps its request charge
// (OpenAI counts rejected requests against RPM) and, conservatively, its token
// reservation; an unknown outcome keeps the full reservation.
func (p OpenAIProfile) Settle(d Demand, reserved Charges, o Outcome, u Usage) Charges {
	if o != Completed {
		return reserved
	}
	in := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
	out := u.OutputTokens + u.ExtraReasoningTokens
	f := reserved
	f[InputTokens] = max(reserved[InputTokens], in)
	f[OutputTokens] = max(reserved[OutputTokens], out)
	f[Tokens] = max(reserved[Tokens], in+out)
	f[TokensPerDay] = max(reserved[TokensPerDay], in+out)
	return f
}

// AnthropicProfile is Anthropic's accounting (rate-limits documentation):
// ITPM counts input_tokens + cache_creation_input_tokens and not cache reads;
// OTPM is metered on the output actually produced, so max_tokens is not
// charged: the output reserve (Demand.OutputTokens, else MaxTokens) is held
// and settled to actual, unused output refunded and overrun becoming debt.
// Thinking tokens are part of output_tokens.
type AnthropicProfile struct{}

// Name returns "anthropic".
func (AnthropicProfile) Name() string { return string(Anthropic) }

// SettlesOutput returns true: Anthropic meters output as produced (see
// OutputSettler).
func (AnthropicProfile) SettlesOutput() bool { return true }

// Charges returns Anthropic's admission charges.
func (AnthropicProfile) Charges(d Demand) Charges {
	var c Charges
	out := d.outputReserve()
	c[Requests] = d.requests()
	c[InputTokens] = d.InputTokens
	c[OutputTokens] = out
	c[Tokens] = d.InputTokens + out
	c[RequestsPerDay] = d.requests()
	c[TokensPerDay] = d.InputTokens + out
	c[InFlight] = 1
	return c
}

// Settle charges actual input (without cache reads) and actual output. A
// rejected call keeps its request and no tokens (Anthropic meters tokens of
// served requests); an unknown outcome keeps the full reservation.
func (AnthropicProfile) Settle(d Demand, reserved Charges, o Outcome, u Usage) Charges {
	switch o {
	case Unknown:
		return reserved
	case Rejected:
		f := reserved
		f[InputTokens], f[OutputTokens], f[Tokens], f[TokensPerDay] = 0, 0, 0, 0
		return f
	}
	in := u.InputTokens + u.CacheCreationInputTokens
	out := u.OutputTokens + u.ExtraReasoningTokens
	f := reserved
	f[InputTokens] = in
	f[OutputTokens] = out
	f[Tokens] = in + out
	f[TokensPerDay] = in + out
	return f
}

// GeminiProfile is Gemini's accounting (Gemini API rate limits: RPM, TPM of
// input tokens, RPD): requests and input tokens. Output is not metered per
// minute; TokensPerDay, if set, counts input. Its per-day quotas reset at
// midnight Pacific time (DayReset).
type GeminiProfile struct{}

// DayResetter is implemented by a Profile whose provider resets its per-day
// quotas at a boundary of its own rather than midnight UTC.
type DayResetter interface {
	// DayReset returns the provider's daily reset.
	DayReset() DayBoundary
}

// DayReset returns midnight America/Los_Angeles: the Gemini API's per-day
// quotas (RPD) reset at midnight Pacific time.
func (GeminiProfile) DayReset() DayBoundary { return DayBoundary{Location: pacific} }

// ProfileDayReset returns l with DayReset set to p's day boundary when p is a
// DayResetter and l leaves DayReset zero. Limits that set a Location (even
// time.UTC) or an Offset keep their own. The gate applies it to every call.
func ProfileDayReset(l Limits, p Profile) Limits {
	if r, ok := p.(DayResetter); ok && l.DayReset == (DayBoundary{}) {
		l.DayReset = r.DayReset()
	}
	return l
}

// pacific is America/Los_Angeles; without a time zone database, Pacific
// standard time (an hour late in summer).
var pacific = func() *time.Location {
	if loc, err := time.LoadLocation("America/Los_Angeles"); err == nil {
		return loc
	}
	return time.FixedZone("PST", -8*60*60)
}()

// Name returns "gemini".
func (GeminiProfile) Name() string { return string(Gemini) }

// Charges returns Gemini's admission charges.
func (GeminiProfile) Charges(d Demand) Charges {
	var c Charges
	in := d.InputTokens + d.CachedInputTokens
	c[Requests] = d.requests()
	c[InputTokens] = in
	c[Tokens] = in
	c[RequestsPerDay] = d.requests()
	c[TokensPerDay] = in
	c[InFlight] = 1
	return c
}

// Settle charges actual input; a rejected call keeps its request only.
func (GeminiProfile) Settle(d Demand, reserved Charges, o Outcome, u Usage) Charges {
	switch o {
	case Unknown:
		return reserved
	case Rejected:
		f := reserved
		f[InputTokens], f[Tokens], f[TokensPerDay] = 0, 0, 0
		return f
	}
	in := u.InputTokens + u.CacheReadInputTokens
	f := reserved
	f[InputTokens] = in
	f[Tokens] = in
	f[TokensPerDay] = in
	return f
}

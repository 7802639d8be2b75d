package accounting

import (
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

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
	Charges(d capacity.Demand) capacity.Charges
	// Settle returns the final charges of a call that reserved reserved, given
	// its outcome and actual usage. Above the reservation is debt.
	Settle(d capacity.Demand, reserved capacity.Charges, o Outcome, u capacity.Usage) capacity.Charges
}

// ProfileFor returns the default accounting profile of provider p, or
// (nil, false) if tollgate has none.
func ProfileFor(p capacity.Provider) (Profile, bool) {
	switch p {
	case capacity.OpenAI:
		return OpenAIProfile{}, true
	case capacity.Anthropic:
		return AnthropicProfile{}, true
	case capacity.Gemini:
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
func (OpenAIProfile) Name() string { return string(capacity.OpenAI) }

func (p OpenAIProfile) tokenCharge(d capacity.Demand) int64 {
	in := d.InputTokens + d.CachedInputTokens
	out := outputReserve(d)
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
func (p OpenAIProfile) Charges(d capacity.Demand) capacity.Charges {
	var c capacity.Charges
	tok := p.tokenCharge(d)
	c[capacity.Requests] = requests(d)
	c[capacity.InputTokens] = d.InputTokens + d.CachedInputTokens
	c[capacity.OutputTokens] = outputReserve(d)
	c[capacity.Tokens] = tok
	c[capacity.RequestsPerDay] = requests(d)
	c[capacity.TokensPerDay] = tok
	c[capacity.InFlight] = 1
	return c
}

// Settle: OpenAI does not refund unused max_tokens, so each token dimension
// settles at max(reserved, actual). A rejected call keeps its request charge
// (OpenAI counts rejected requests against RPM) and, conservatively, its token
// reservation; an unknown outcome keeps the full reservation.
func (p OpenAIProfile) Settle(d capacity.Demand, reserved capacity.Charges, o Outcome, u capacity.Usage) capacity.Charges {
	if o != Completed {
		return reserved
	}
	in := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
	out := u.OutputTokens + u.ExtraReasoningTokens
	f := reserved
	f[capacity.InputTokens] = max(reserved[capacity.InputTokens], in)
	f[capacity.OutputTokens] = max(reserved[capacity.OutputTokens], out)
	f[capacity.Tokens] = max(reserved[capacity.Tokens], in+out)
	f[capacity.TokensPerDay] = max(reserved[capacity.TokensPerDay], in+out)
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
func (AnthropicProfile) Name() string { return string(capacity.Anthropic) }

// SettlesOutput returns true: Anthropic meters output as produced (see
// OutputSettler).
func (AnthropicProfile) SettlesOutput() bool { return true }

// Charges returns Anthropic's admission charges.
func (AnthropicProfile) Charges(d capacity.Demand) capacity.Charges {
	var c capacity.Charges
	out := outputReserve(d)
	c[capacity.Requests] = requests(d)
	c[capacity.InputTokens] = d.InputTokens
	c[capacity.OutputTokens] = out
	c[capacity.Tokens] = d.InputTokens + out
	c[capacity.RequestsPerDay] = requests(d)
	c[capacity.TokensPerDay] = d.InputTokens + out
	c[capacity.InFlight] = 1
	return c
}

// Settle charges actual input (without cache reads) and actual output. A
// rejected call keeps its request and no tokens (Anthropic meters tokens of
// served requests); an unknown outcome keeps the full reservation.
func (AnthropicProfile) Settle(d capacity.Demand, reserved capacity.Charges, o Outcome, u capacity.Usage) capacity.Charges {
	switch o {
	case Unknown:
		return reserved
	case Rejected:
		f := reserved
		f[capacity.InputTokens], f[capacity.OutputTokens], f[capacity.Tokens], f[capacity.TokensPerDay] = 0, 0, 0, 0
		return f
	}
	in := u.InputTokens + u.CacheCreationInputTokens
	out := u.OutputTokens + u.ExtraReasoningTokens
	f := reserved
	f[capacity.InputTokens] = in
	f[capacity.OutputTokens] = out
	f[capacity.Tokens] = in + out
	f[capacity.TokensPerDay] = in + out
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
	DayReset() capacity.DayBoundary
}

// DayReset returns midnight America/Los_Angeles: the Gemini API's per-day
// quotas (RPD) reset at midnight Pacific time.
func (GeminiProfile) DayReset() capacity.DayBoundary { return capacity.DayBoundary{Location: pacific} }

// ProfileDayReset returns l with DayReset set to p's day boundary when p is a
// DayResetter and l leaves DayReset zero. Limits that set a Location (even
// time.UTC) or an Offset keep their own. The gate applies it to every call.
func ProfileDayReset(l capacity.Limits, p Profile) capacity.Limits {
	if r, ok := p.(DayResetter); ok && l.DayReset == (capacity.DayBoundary{}) {
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
func (GeminiProfile) Name() string { return string(capacity.Gemini) }

// Charges returns Gemini's admission charges.
func (GeminiProfile) Charges(d capacity.Demand) capacity.Charges {
	var c capacity.Charges
	in := d.InputTokens + d.CachedInputTokens
	c[capacity.Requests] = requests(d)
	c[capacity.InputTokens] = in
	c[capacity.Tokens] = in
	c[capacity.RequestsPerDay] = requests(d)
	c[capacity.TokensPerDay] = in
	c[capacity.InFlight] = 1
	return c
}

// Settle charges actual input; a rejected call keeps its request only.
func (GeminiProfile) Settle(d capacity.Demand, reserved capacity.Charges, o Outcome, u capacity.Usage) capacity.Charges {
	switch o {
	case Unknown:
		return reserved
	case Rejected:
		f := reserved
		f[capacity.InputTokens], f[capacity.Tokens], f[capacity.TokensPerDay] = 0, 0, 0
		return f
	}
	in := u.InputTokens + u.CacheReadInputTokens
	f := reserved
	f[capacity.InputTokens] = in
	f[capacity.Tokens] = in
	f[capacity.TokensPerDay] = in
	return f
}

// requests is the requests a demand counts: at least one.
func requests(d capacity.Demand) int64 {
	if d.Requests <= 0 {
		return 1
	}
	return d.Requests
}

// outputReserve is the output a demand reserves: its expected output, or
// else its max_tokens.
func outputReserve(d capacity.Demand) int64 {
	if d.OutputTokens > 0 {
		return d.OutputTokens
	}
	return d.MaxTokens
}

// OutputSettler is implemented by a Profile whose provider meters output as
// it is produced and settles the reservation to actual use, so a call may
// reserve less output than its max_tokens: the gate then reserves the
// output its kind was learned to need (a quantile, at most max_tokens) and
// settling corrects the rest. A profile that charges max_tokens at
// admission (OpenAI) does not implement it.
type OutputSettler interface {
	// SettlesOutput reports that output is settled to actual use.
	SettlesOutput() bool
}

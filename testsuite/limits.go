package testsuite

import (
	"errors"
	"fmt"
	"time"
)

// Enforcement granularities for Limits.BurstWindow.
const (
	// PerMinute lets each per-minute bucket hold a whole minute's limit, so a
	// client may burst the full limit at once (OpenAI's documented behaviour).
	PerMinute = time.Minute
	// PerSecond lets each per-minute bucket hold one second's worth of its
	// limit (limit/60, at least 1), as Anthropic documents for some tiers:
	// 60 RPM is then enforced as 1 request per second.
	PerSecond = time.Second
)

// Limits is the budget of one scope (model + API key). A zero field means
// that dimension is not limited; the zero Limits limits nothing.
//
// The per-minute limits are continuously refilling token buckets: each refills
// at limit/minute and holds at most limit × BurstWindow/minute (at least 1).
// The per-day limits are counters that reset at midnight UTC (Gemini models:
// midnight America/Los_Angeles, as Gemini's quotas do).
type Limits struct {
	// RequestsPerMinute is the request bucket (RPM). Every request that
	// reaches admission is charged one request, admitted or not.
	RequestsPerMinute int64
	// TokensPerMinute is OpenAI's TPM: input tokens + max_tokens are charged
	// at admission and unused output is not refunded. OpenAI models only.
	TokensPerMinute int64
	// InputTokensPerMinute is Anthropic's ITPM: input tokens other than cache
	// reads are charged at admission; for Gemini models it is Gemini's TPM,
	// which counts input tokens only. Anthropic and Gemini models only.
	InputTokensPerMinute int64
	// OutputTokensPerMinute is Anthropic's OTPM: output is charged as it is
	// produced (when the response completes; max_tokens is not charged). A
	// request is refused while the bucket holds less than one token.
	// Anthropic models only.
	OutputTokensPerMinute int64
	// RequestsPerDay is the daily request quota (admitted requests).
	RequestsPerDay int64
	// TokensPerDay is the daily token quota, charged like the per-minute
	// token dimensions of the model's provider.
	TokensPerDay int64
	// MaxConcurrent caps the requests of the scope in flight at once.
	MaxConcurrent int64
	// BurstWindow sets how finely the per-minute limits are enforced: each
	// bucket holds BurstWindow's worth of its rate. If zero, PerMinute is used.
	// It must lie in (0, 1m].
	BurstWindow time.Duration
}

// Limit returns the configured limit of dimension d (per minute or per day);
// 0 means unlimited.
func (l Limits) Limit(d Dimension) int64 {
	switch d {
	case Requests:
		return l.RequestsPerMinute
	case InputTokens:
		return l.InputTokensPerMinute
	case OutputTokens:
		return l.OutputTokensPerMinute
	case Tokens:
		return l.TokensPerMinute
	case RequestsPerDay:
		return l.RequestsPerDay
	case TokensPerDay:
		return l.TokensPerDay
	}
	return 0
}

// Burst returns the capacity of dimension d's bucket: limit × BurstWindow /
// minute (at least 1) for a per-minute dimension, the whole limit for a daily
// one, 0 if d is unlimited.
func (l Limits) Burst(d Dimension) float64 {
	lim := l.Limit(d)
	if lim <= 0 {
		return 0
	}
	if d.Daily() {
		return float64(lim)
	}
	return bucketCapacity(lim, l.burstWindow())
}

func (l Limits) burstWindow() time.Duration {
	if l.BurstWindow == 0 {
		return PerMinute
	}
	return l.BurstWindow
}

// validate reports the first invalid field of l for a model of provider p.
func (l Limits) validate(p Provider) error {
	for d := Dimension(0); d < numDimensions; d++ {
		if l.Limit(d) < 0 {
			return fmt.Errorf("testsuite: limit %s is negative (%d)", d, l.Limit(d))
		}
	}
	if l.MaxConcurrent < 0 {
		return fmt.Errorf("testsuite: MaxConcurrent is negative (%d)", l.MaxConcurrent)
	}
	if l.BurstWindow < 0 || l.BurstWindow > time.Minute {
		return fmt.Errorf("testsuite: BurstWindow %v is outside (0, 1m]", l.BurstWindow)
	}
	switch p {
	case OpenAI:
		if l.InputTokensPerMinute != 0 || l.OutputTokensPerMinute != 0 {
			return errors.New("testsuite: OpenAI meters combined tokens: set TokensPerMinute, not Input/OutputTokensPerMinute")
		}
	case Anthropic:
		if l.TokensPerMinute != 0 {
			return errors.New("testsuite: Anthropic meters input and output separately: set Input/OutputTokensPerMinute, not TokensPerMinute")
		}
	case Gemini:
		if l.TokensPerMinute != 0 || l.OutputTokensPerMinute != 0 {
			return errors.New("testsuite: Gemini's TPM counts input tokens only: set InputTokensPerMinute, not TokensPerMinute or OutputTokensPerMinute")
		}
	}
	return nil
}

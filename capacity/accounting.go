package capacity

import (
	"errors"
	"fmt"
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
	// (learn.CalibrateInput). False (the default): an exact or tokenizer count,
	// used as it is.
	InputEstimated bool
	// OutputTokens is the output to reserve: the expected completion length
	// including reasoning/thinking tokens. If zero, MaxTokens is reserved.
	OutputTokens int64
	// MaxTokens is the max_tokens (max_completion_tokens) the request sends,
	// including any reasoning/thinking budget. Zero if unset.
	MaxTokens int64
}

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

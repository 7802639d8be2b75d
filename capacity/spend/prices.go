package spend

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Price is what a model costs per million tokens, in one currency unit of
// the caller's choosing (the ledger and the spend caps use the same).
type Price struct {
	// Input is the price of a million prompt tokens not read from the
	// cache.
	Input float64
	// CachedInput is the price of a million prompt tokens read from the
	// provider's prompt cache.
	CachedInput float64
	// Output is the price of a million completion tokens, reasoning
	// included.
	Output float64
	// CacheWrite is the price of a million prompt tokens written to the
	// cache (Anthropic's cache_creation_input_tokens). If zero, Input.
	CacheWrite float64
}

// Cost returns what usage u costs at p.
func (p Price) Cost(u capacity.Usage) float64 {
	write := p.CacheWrite
	if write == 0 {
		write = p.Input
	}
	return (float64(u.InputTokens)*p.Input + float64(u.CacheCreationInputTokens)*write +
		float64(u.CacheReadInputTokens)*p.CachedInput + float64(u.OutputTokens+u.ExtraReasoningTokens)*p.Output) / 1e6
}

// WorstCase returns the most a call of demand d is expected to cost at p:
// its estimated prompt at the input and cached input prices and its whole
// max_tokens (or its OutputTokens, if larger) at the output price. A demand
// without max_tokens or OutputTokens prices no output.
func (p Price) WorstCase(d capacity.Demand) float64 {
	out := max(d.MaxTokens, d.OutputTokens, 0)
	return (float64(max(d.InputTokens, 0))*p.Input + float64(max(d.CachedInputTokens, 0))*p.CachedInput + float64(out)*p.Output) / 1e6
}

// Validate reports whether every price is a finite number >= 0.
func (p Price) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"Input", p.Input}, {"CachedInput", p.CachedInput}, {"Output", p.Output}, {"CacheWrite", p.CacheWrite}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("%w: %s is %v; want a finite price >= 0", ErrInvalidPrices, f.name, f.v)
		}
	}
	return nil
}

// Prices is a price table: the Price of each model by PriceKey
// ("openai/gpt-4o"). A model is looked up by its name, then by its limit
// group (so "openai/gpt-4o" prices gpt-4o-2024-08-06 unless that snapshot
// has its own entry).
type Prices map[string]Price

// ErrInvalidPrices is returned (wrapped) for a price table that cannot be
// used.
var ErrInvalidPrices = errors.New("spend: invalid prices")

// PriceKey returns the key of provider's model in Prices.
func PriceKey(provider capacity.Provider, model string) string { return string(provider) + "/" + model }

// Validate reports the first entry of p whose key is not provider/model or
// whose price is not valid.
func (p Prices) Validate() error {
	for k, price := range p {
		provider, model, ok := strings.Cut(k, "/")
		if !ok || provider == "" || model == "" {
			return fmt.Errorf("%w: key %q is not provider/model", ErrInvalidPrices, k)
		}
		if err := price.Validate(); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

// Lookup returns the price of provider's model, else of its limit group;
// false if p has neither.
func (p Prices) Lookup(provider capacity.Provider, model, group string) (Price, bool) {
	if pr, ok := p[PriceKey(provider, model)]; ok {
		return pr, true
	}
	if group != "" && group != model {
		pr, ok := p[PriceKey(provider, group)]
		return pr, ok
	}
	return Price{}, false
}

package learn

import (
	"fmt"
	"math"
	"time"
)

// Sample is what one call that settled with usage teaches: how much output
// it produced against the max_tokens it sent, and how its actual input
// compared with the estimate it was admitted on.
type Sample struct {
	// OutputTokens is the output produced, reasoning included
	// (Usage.OutputTokens + Usage.ExtraReasoningTokens).
	OutputTokens int64
	// MaxTokens is the max_tokens the call sent; zero if unset.
	MaxTokens int64
	// InputTokens is the whole prompt as the provider counted it: uncached,
	// cache reads and cache writes.
	InputTokens int64
	// InputEstimate is the estimated prompt the call was admitted on
	// (Demand.InputTokens + Demand.CachedInputTokens) when that was an
	// estimate (Demand.InputEstimated); zero otherwise. With InputTokens it
	// gives one sample of the scope's input ratio.
	InputEstimate int64
}

// Validate reports whether s can be learned: no field may be negative.
func (s Sample) Validate() error {
	if s.OutputTokens < 0 || s.MaxTokens < 0 || s.InputTokens < 0 || s.InputEstimate < 0 {
		return fmt.Errorf("%w: negative token count in sample", ErrBadSample)
	}
	return nil
}

// InputRatio returns actual over estimated input, and false when the sample
// has no estimate or no actual input.
func (s Sample) InputRatio() (float64, bool) {
	if s.InputEstimate <= 0 || s.InputTokens <= 0 {
		return 0, false
	}
	return float64(s.InputTokens) / float64(s.InputEstimate), true
}

// Learned is what a store has learned of one call kind on one scope from the
// samples of its settled calls, each histogram decaying (see Histogram) so
// it follows change.
type Learned struct {
	// Output, Input and MaxTokens hold one value per call of the kind:
	// output produced, whole prompt, and max_tokens sent (0 if unset).
	// They are added together, so their counts are equal.
	Output, Input, MaxTokens Histogram
	// InputRatio is the scope's (every kind's) actual over estimated input,
	// from the calls whose input was an estimate.
	InputRatio Histogram
	// Updated is when the kind last learned a sample, in the store's clock;
	// zero if it never did.
	Updated time.Time
}

// Calls returns the (decayed) number of calls the kind learned from.
func (l Learned) Calls() float64 { return l.Output.Count() }

// Clone returns an independent copy of l.
func (l Learned) Clone() Learned {
	l.Output, l.Input, l.MaxTokens, l.InputRatio = l.Output.Clone(), l.Input.Clone(), l.MaxTokens.Clone(), l.InputRatio.Clone()
	return l
}

// Memory is how long a store keeps what a (scope, kind) learned
// after its last sample.
const Memory = 7 * 24 * time.Hour

// Input ratio bounds: a learned input ratio is held to [MinInputRatio,
// MaxInputRatio], so no run of odd samples can shrink an estimate to
// nothing or inflate it past twice.
const (
	MinInputRatio = 0.25
	MaxInputRatio = 2.0
)

// CalibrateInput returns estimate scaled by ratio held to [MinInputRatio,
// MaxInputRatio], rounded up; a ratio that is NaN, infinite or not positive
// leaves estimate as it is.
func CalibrateInput(estimate int64, ratio float64) int64 {
	if estimate <= 0 || math.IsNaN(ratio) || math.IsInf(ratio, 0) || ratio <= 0 {
		return estimate
	}
	r := min(max(ratio, MinInputRatio), MaxInputRatio)
	return int64(math.Ceil(float64(estimate) * r))
}

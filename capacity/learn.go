package capacity

import (
	"context"
	"errors"
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

// Learner is implemented by stores that keep what settled calls teach, per
// scope and call kind, shared by every worker on the store. The gate
// (interceptor) reserves learned output and calibrates estimated input from
// it; `tollgate advise` reads it.
//
// Kinds are names (an activity type, a caller's usage key) that pass
// ValidateKind, never prompt text. What a (scope, kind) learned is
// forgotten LearnedMemory after its last sample, and a scope's input ratio
// LearnedMemory after the last sample that had an estimate.
type Learner interface {
	// Learn records s for kind on scope: its output, input and max_tokens
	// in the kind's histograms, its input ratio (Sample.InputRatio), if
	// any, in the scope's. Concurrent Learns are each counted once.
	Learn(ctx context.Context, scope Scope, kind string, s Sample) error
	// Learned returns what kind learned on scope with the scope's input
	// ratio; empty histograms if nothing was learned (or it was
	// forgotten). It changes nothing.
	Learned(ctx context.Context, scope Scope, kind string) (Learned, error)
	// LearnedKinds returns the kinds that learned on scope and are not
	// forgotten, sorted.
	LearnedKinds(ctx context.Context, scope Scope) ([]string, error)
}

// LearnedMemory is how long a store keeps what a (scope, kind) learned
// after its last sample.
const LearnedMemory = 7 * 24 * time.Hour

// MaxKindLength is the longest kind ValidateKind accepts, in bytes.
const MaxKindLength = 100

// ErrInvalidKind is returned (wrapped) for a call kind that cannot be used
// as a name. The error never holds the kind's value.
var ErrInvalidKind = errors.New("capacity: invalid call kind")

// ValidateKind reports whether kind can name a kind of call in a store (a
// Redis key, a metric): 1 to MaxKindLength ASCII letters, digits, '_', '-'
// and '.', and nothing with the shape of a key or token (LooksLikeSecret).
// Activity type names pass; prompt text and keys do not.
func ValidateKind(kind string) error {
	if kind == "" || len(kind) > MaxKindLength {
		return fmt.Errorf("%w: want 1 to %d bytes, got %d", ErrInvalidKind, MaxKindLength, len(kind))
	}
	for i := 0; i < len(kind); i++ {
		c := kind[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("%w: byte %d is not a letter, digit, '_', '-' or '.'", ErrInvalidKind, i)
		}
	}
	if LooksLikeSecret(kind) {
		return fmt.Errorf("%w: it has the shape of an API key or token", ErrInvalidKind)
	}
	return nil
}

// checkLearn validates the arguments of Learner.Learn.
func checkLearn(scope Scope, kind string, s Sample) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	if err := ValidateKind(kind); err != nil {
		return err
	}
	return s.Validate()
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

package capacity

import (
	"context"
	"fmt"

	"github.com/tollgate-dev/tollgate/capacity/learn"
	"github.com/tollgate-dev/tollgate/internal/secrets"
)

// Learner is implemented by stores that keep what settled calls teach, per
// scope and call kind, shared by every worker on the store. The gate
// (interceptor) reserves learned output and calibrates estimated input from
// it; `tollgate advise` reads it.
//
// Kinds are names (an activity type, a caller's usage key) that pass
// ValidateKind, never prompt text. What a (scope, kind) learned is
// forgotten learn.Memory after its last sample, and a scope's input ratio
// learn.Memory after the last sample that had an estimate.
type Learner interface {
	// Learn records s for kind on scope: its output, input and max_tokens
	// in the kind's histograms, its input ratio (Sample.InputRatio), if
	// any, in the scope's. Concurrent Learns are each counted once.
	Learn(ctx context.Context, scope Scope, kind string, s learn.Sample) error
	// Learned returns what kind learned on scope with the scope's input
	// ratio; empty histograms if nothing was learned (or it was
	// forgotten). It changes nothing.
	Learned(ctx context.Context, scope Scope, kind string) (learn.Learned, error)
	// LearnedKinds returns the kinds that learned on scope and are not
	// forgotten, sorted.
	LearnedKinds(ctx context.Context, scope Scope) ([]string, error)
}

// ValidateKind reports whether kind can name a kind of call in a store (a
// Redis key, a metric): 1 to MaxKindLength ASCII letters, digits, '_', '-'
// and '.', and nothing with the shape of a key or token (the shapes Scope.Validate refuses).
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
	if secrets.LooksLikeKey(kind) {
		return fmt.Errorf("%w: it has the shape of an API key or token", ErrInvalidKind)
	}
	return nil
}

// checkLearn validates the arguments of Learner.Learn.
func checkLearn(scope Scope, kind string, s learn.Sample) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	if err := ValidateKind(kind); err != nil {
		return err
	}
	return s.Validate()
}

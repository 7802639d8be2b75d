package errors

import (
	"context"
	stderrors "errors"
	"math/rand/v2"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
)

// Error types of the ApplicationErrors tollgate returns: stable, namespaced,
// part of the API (workflows and retry policies match on them).
const (
	TypeRateLimited    = "tollgate.RateLimited"
	TypeQuotaExhausted = "tollgate.QuotaExhausted"
	TypeOverloaded     = "tollgate.Overloaded"
	TypeBadCredential  = "tollgate.BadCredential"
	TypeNoAccess       = "tollgate.NoAccess"
	TypeContextTooLong = "tollgate.ContextTooLong"
	TypeBadRequest     = "tollgate.BadRequest"
	TypeTransient      = "tollgate.Transient"
	TypeUnknown        = "tollgate.Unknown"
	// TypeCapacityWait is a benign, retryable wait for the shared budget,
	// returned by the interceptor with the time the budget has room.
	TypeCapacityWait = "tollgate.CapacityWait"
	// TypeDeadlineUnmeetable is a non-retryable refusal of a call whose
	// deadline falls before the budget can admit it.
	TypeDeadlineUnmeetable = "tollgate.DeadlineUnmeetable"

	typePrefix = "tollgate."
)

var classTypes = [numClasses]string{
	Unknown:        TypeUnknown,
	RateLimited:    TypeRateLimited,
	QuotaExhausted: TypeQuotaExhausted,
	Overloaded:     TypeOverloaded,
	BadCredential:  TypeBadCredential,
	NoAccess:       TypeNoAccess,
	ContextTooLong: TypeContextTooLong,
	BadRequest:     TypeBadRequest,
	Transient:      TypeTransient,
	// Canceled is never an ApplicationError.
}

// TypeOf returns the ApplicationError type of class c ("" for Canceled).
func TypeOf(c Class) string {
	if c < 0 || int(c) >= numClasses {
		return TypeUnknown
	}
	return classTypes[c]
}

// DefaultRefillPeriod is the default Converter.RefillPeriod: per-minute
// budgets refill within a minute.
const DefaultRefillPeriod = time.Minute

// minRetryDelay is the shortest delay set when the provider asked for none:
// Temporal reads a zero NextRetryDelay as "not set".
const minRetryDelay = time.Second

// Converter turns verdicts into the errors activities return. The zero value
// uses the documented defaults and is safe for concurrent use.
type Converter struct {
	// Jitter returns a duration in [0, n) for n > 0; results outside are
	// clamped. If nil, uniformly random (math/rand/v2). Tests inject a fixed
	// source.
	Jitter func(n time.Duration) time.Duration
	// RefillPeriod bounds the jitter: a rate limit without a requested wait
	// is retried after a uniformly random delay within one period. If zero
	// or negative, DefaultRefillPeriod.
	RefillPeriod time.Duration
}

// ActivityError returns the error an activity returns for verdict v on the
// scope with key scope (capacity.Scope.Key; may be empty). Return it as it
// is: wrapping it with %w makes Temporal ignore NonRetryable and
// NextRetryDelay.
//
// For Canceled it returns the context's error, so Temporal reports a
// cancellation. For every other class it returns a *temporal.ApplicationError
// with type TypeOf(v.Class), message v.String(), Details (DetailsFor) and no
// Cause (the SDK's error text would carry URLs and bodies into history):
//   - QuotaExhausted, BadCredential, NoAccess, ContextTooLong, BadRequest are
//     NonRetryable.
//   - RateLimited is benign (ApplicationErrorCategoryBenign) and always sets
//     NextRetryDelay: the provider's wait plus full jitter over
//     min(wait, RefillPeriod), never earlier than asked; without a wait,
//     full jitter over one RefillPeriod, at least one second.
//   - Overloaded, Transient and Unknown set NextRetryDelay only when the
//     provider asked for a wait (same jitter); otherwise the retry policy's
//     backoff applies.
func (c Converter) ActivityError(v Verdict, scope string) error {
	if v.Class == Canceled {
		if v.ctxErr != nil {
			return v.ctxErr
		}
		return context.Canceled
	}
	opts := temporal.ApplicationErrorOptions{
		NonRetryable:   !v.Class.Retryable(),
		Details:        []any{DetailsFor(v, scope)},
		NextRetryDelay: c.retryDelay(v),
	}
	if v.Class == RateLimited {
		opts.Category = temporal.ApplicationErrorCategoryBenign
	}
	return temporal.NewApplicationErrorWithOptions(v.String(), TypeOf(v.Class), opts)
}

// ActivityError is Converter{}.ActivityError: random jitter, a one-minute
// refill period.
func ActivityError(v Verdict, scope string) error {
	return Converter{}.ActivityError(v, scope)
}

// retryDelay is the NextRetryDelay of v; zero leaves the retry policy in
// charge.
func (c Converter) retryDelay(v Verdict) time.Duration {
	refill := c.RefillPeriod
	if refill <= 0 {
		refill = DefaultRefillPeriod
	}
	wait := v.RetryAfter
	switch v.Class {
	case RateLimited:
		if wait <= 0 {
			return max(c.jitter(refill), minRetryDelay)
		}
	case Overloaded, Transient, Unknown:
		if wait <= 0 {
			return 0
		}
	default:
		return 0
	}
	j := c.jitter(min(wait, refill))
	if wait > time.Duration(1<<63-1)-j {
		return wait
	}
	return wait + j
}

// jitter returns a duration in [0, n).
func (c Converter) jitter(n time.Duration) time.Duration {
	if n <= 0 {
		return 0
	}
	var j time.Duration
	if c.Jitter != nil {
		j = c.Jitter(n)
	} else {
		j = rand.N(n)
	}
	return min(max(j, 0), n-1)
}

// applicationError finds the tollgate ApplicationError in err's chain, as
// the workflow sees it (inside a *temporal.ActivityError) or as the activity
// returned it.
func applicationError(err error) (*temporal.ApplicationError, bool) {
	ae, ok := stderrors.AsType[*temporal.ApplicationError](err)
	if !ok || ae == nil || !strings.HasPrefix(ae.Type(), typePrefix) {
		return nil, false
	}
	return ae, true
}

func hasType(err error, typ string) bool {
	ae, ok := applicationError(err)
	return ok && ae.Type() == typ
}

// ClassOf returns the class of a tollgate error in err's chain.
// TypeCapacityWait reports RateLimited and TypeDeadlineUnmeetable
// QuotaExhausted only through their Details; ok is false for them when they
// carry none.
func ClassOf(err error) (Class, bool) {
	ae, ok := applicationError(err)
	if !ok {
		return Unknown, false
	}
	for c, t := range classTypes {
		if t != "" && t == ae.Type() {
			return Class(c), true
		}
	}
	if d, ok := DetailsOf(err); ok {
		return d.Class, true
	}
	return Unknown, false
}

// DetailsOf decodes the Details of a tollgate error in err's chain (an
// *temporal.ActivityError wrapping the ApplicationError, or the
// ApplicationError itself).
func DetailsOf(err error) (Details, bool) {
	ae, ok := applicationError(err)
	if !ok || !ae.HasDetails() {
		return Details{}, false
	}
	var d Details
	if ae.Details(&d) != nil {
		return Details{}, false
	}
	return d, true
}

// IsRateLimited reports whether err is a tollgate RateLimited error.
func IsRateLimited(err error) bool { return hasType(err, TypeRateLimited) }

// IsQuotaExhausted reports whether err is a tollgate QuotaExhausted error.
func IsQuotaExhausted(err error) bool { return hasType(err, TypeQuotaExhausted) }

// IsOverloaded reports whether err is a tollgate Overloaded error.
func IsOverloaded(err error) bool { return hasType(err, TypeOverloaded) }

// IsBadCredential reports whether err is a tollgate BadCredential error.
func IsBadCredential(err error) bool { return hasType(err, TypeBadCredential) }

// IsNoAccess reports whether err is a tollgate NoAccess error.
func IsNoAccess(err error) bool { return hasType(err, TypeNoAccess) }

// IsContextTooLong reports whether err is a tollgate ContextTooLong error.
func IsContextTooLong(err error) bool { return hasType(err, TypeContextTooLong) }

// IsBadRequest reports whether err is a tollgate BadRequest error.
func IsBadRequest(err error) bool { return hasType(err, TypeBadRequest) }

// IsTransient reports whether err is a tollgate Transient error.
func IsTransient(err error) bool { return hasType(err, TypeTransient) }

// IsCapacityWait reports whether err is a tollgate CapacityWait error.
func IsCapacityWait(err error) bool { return hasType(err, TypeCapacityWait) }

// IsDeadlineUnmeetable reports whether err is a tollgate DeadlineUnmeetable
// error.
func IsDeadlineUnmeetable(err error) bool { return hasType(err, TypeDeadlineUnmeetable) }

package errors

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
)

// TypeMisconfigured is the type of the non-retryable error a model call
// fails with when it cannot be gated as configured: no limits for its scope,
// activity options under which waits would use up attempts, a missing
// credential, an invalid request.
const TypeMisconfigured = "tollgate.Misconfigured"

// CapacityWaitError is the benign, retryable error with which a gated call
// frees its worker slot until the shared budget has room: NextRetryDelay is
// delay (never zero, which Temporal reads as unset). why and dimension say
// what binds; scope is the quota scope's key.
func CapacityWaitError(delay time.Duration, scope, why, dimension string) error {
	delay = max(delay, time.Millisecond)
	return temporal.NewApplicationErrorWithOptions(
		"tollgate: waiting for capacity on "+scope+" ("+why+"), retry in "+delay.Round(time.Millisecond).String(),
		TypeCapacityWait,
		temporal.ApplicationErrorOptions{
			NextRetryDelay: delay,
			Category:       temporal.ApplicationErrorCategoryBenign,
			Details:        []any{Details{Class: RateLimited, Scope: scope, RetryAfter: delay, Dimension: dimension}},
		})
}

// DeadlineUnmeetableError is the non-retryable refusal of a call that cannot
// be admitted before its deadline; msg says why, without secrets.
func DeadlineUnmeetableError(msg, scope string) error {
	return temporal.NewApplicationErrorWithOptions("tollgate: "+msg, TypeDeadlineUnmeetable,
		temporal.ApplicationErrorOptions{
			NonRetryable: true,
			Details:      []any{Details{Class: RateLimited, Scope: scope}},
		})
}

// TypeExceedsLimit is the type of the non-retryable error a model call fails
// with when its demand exceeds what a configured limit can ever admit (more
// tokens than the per-minute limit, more than a day's allowance): waiting
// cannot help; the call must be split, or sent on a connection with a higher
// limit (workflows.CallModel falls back to the next one). A call larger than
// the bucket but within the limit is not refused: it waits.
const TypeExceedsLimit = "tollgate.ExceedsLimit"

// ExceedsLimitError is the non-retryable TypeExceedsLimit error of a demand
// of requested in dimension, whose limit admits at most limit.
func ExceedsLimitError(scope, dimension string, limit, requested int64) error {
	msg := fmt.Sprintf("tollgate: a call of %d %s on %s exceeds the most its limit admits (%d): split the call, or raise the limit if the provider's is higher",
		requested, dimension, scope, limit)
	return temporal.NewApplicationErrorWithOptions(msg, TypeExceedsLimit,
		temporal.ApplicationErrorOptions{
			NonRetryable: true,
			Details:      []any{Details{Scope: scope, Dimension: dimension, Limit: limit, Requested: requested}},
		})
}

// IsExceedsLimit reports whether err is a tollgate ExceedsLimit error.
func IsExceedsLimit(err error) bool { return hasType(err, TypeExceedsLimit) }

// MisconfiguredError is the non-retryable TypeMisconfigured error.
func MisconfiguredError(msg string) error {
	return temporal.NewApplicationErrorWithOptions("tollgate: misconfigured model call: "+msg, TypeMisconfigured,
		temporal.ApplicationErrorOptions{NonRetryable: true})
}

// IsMisconfigured reports whether err is a tollgate Misconfigured error.
func IsMisconfigured(err error) bool { return hasType(err, TypeMisconfigured) }

package errors

import (
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

// MisconfiguredError is the non-retryable TypeMisconfigured error.
func MisconfiguredError(msg string) error {
	return temporal.NewApplicationErrorWithOptions("tollgate: misconfigured model call: "+msg, TypeMisconfigured,
		temporal.ApplicationErrorOptions{NonRetryable: true})
}

// IsMisconfigured reports whether err is a tollgate Misconfigured error.
func IsMisconfigured(err error) bool { return hasType(err, TypeMisconfigured) }

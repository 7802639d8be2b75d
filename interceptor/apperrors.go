package interceptor

import (
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
)

// TypeMisconfigured is tgerrors.TypeMisconfigured: the type of the
// non-retryable error a model call fails with when the gate cannot account
// for it.
const TypeMisconfigured = tgerrors.TypeMisconfigured

func misconfigured(msg string) error { return tgerrors.MisconfiguredError(msg) }

func capacityWait(delay time.Duration, scope capacity.Scope, why string, dim string) error {
	return tgerrors.CapacityWaitError(delay, scope.Key(), why, dim)
}

func deadlineUnmeetable(msg string, scope capacity.Scope) error {
	return tgerrors.DeadlineUnmeetableError(msg, scope.Key())
}

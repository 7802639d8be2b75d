package capacity

import (
	"errors"
	"fmt"
)

// Errors callers branch on. The Invalid errors are returned wrapped, with
// what was wrong; errors.Is finds them.
var (
	// ErrLeaseNotFound: the lease expired and was reclaimed, or never existed.
	ErrLeaseNotFound = errors.New("capacity: lease not found")

	// ErrStaleAttempt: a Reserve for an attempt older than the live one.
	ErrStaleAttempt = errors.New("capacity: attempt older than the call's live lease")

	// ErrInvalidRequest is returned (wrapped) for malformed requests.
	ErrInvalidRequest = errors.New("capacity: invalid request")

	// ErrStoreUnavailable is returned (wrapped) when a shared store cannot
	// be reached; nothing was granted.
	ErrStoreUnavailable = errors.New("capacity: store unavailable")

	// ErrInvalidDemand is returned (wrapped) by Demand.Validate; it wraps
	// ErrInvalidRequest.
	ErrInvalidDemand = fmt.Errorf("%w: invalid demand", ErrInvalidRequest)

	// ErrDemandTooLarge matches any *DemandTooLargeError with errors.Is.
	ErrDemandTooLarge = errors.New("capacity: demand larger than the budget's capacity")

	// ErrInvalidLimits is returned (wrapped) by Limits.Validate.
	ErrInvalidLimits = errors.New("capacity: invalid limits")

	// ErrInvalidScope is returned (wrapped) for a scope that cannot be used.
	ErrInvalidScope = errors.New("capacity: invalid scope")

	// ErrKeyShapedName is returned (wrapped) by Scope.Validate for a scope field
	// that has the shape of an API key or token. It wraps ErrInvalidScope. The
	// error names the field, never its value.
	ErrKeyShapedName = fmt.Errorf("%w: a name has the shape of an API key or token", ErrInvalidScope)

	// ErrInvalidFairness is returned (wrapped) for a fairness key or policy that
	// cannot be used. The error never holds the key's value.
	ErrInvalidFairness = errors.New("capacity: invalid fairness")

	// ErrInvalidClasses is returned (wrapped) by NewClassSet.
	ErrInvalidClasses = errors.New("capacity: invalid class definitions")

	// ErrInvalidKind is returned (wrapped) for a call kind that cannot be used
	// as a name. The error never holds the kind's value.
	ErrInvalidKind = errors.New("capacity: invalid call kind")
)

package errors

import (
	stderrors "errors"
	"fmt"
)

// Class is the kind of a provider failure: it decides what the caller does
// next. The zero value is Unknown.
type Class int

const (
	// Unknown: nothing identified the failure. Retryable; the retry policy
	// bounds it.
	Unknown Class = iota
	// RateLimited: a per-minute budget is spent; wait (Verdict.RetryAfter)
	// and retry on the same scope.
	RateLimited
	// QuotaExhausted: a daily or billing quota is spent; nothing succeeds on
	// the scope before Verdict.ResetAt (zero when a person must act).
	QuotaExhausted
	// Overloaded: the provider is shedding load (Anthropic 529, 503
	// "overloaded" or "high demand"). Retryable, not the caller's fault.
	Overloaded
	// BadCredential: the credential is refused (401, Gemini API_KEY_INVALID):
	// bad for every model on it.
	BadCredential
	// NoAccess: the credential may not use this model (403, unknown model
	// 404): bad for this model only.
	NoAccess
	// ContextTooLong: the request is too large for the model's context, the
	// request size limit (413), or the whole per-minute bucket; it must be
	// made smaller.
	ContextTooLong
	// BadRequest: any other 400/422; resending it as is fails the same way.
	BadRequest
	// Transient: connection reset, EOF, timeouts, 500/502/504; retry.
	Transient
	// Canceled: the caller's context ended; return the context's error.
	Canceled

	numClasses = int(Canceled) + 1
)

var classNames = [numClasses]string{
	"Unknown", "RateLimited", "QuotaExhausted", "Overloaded", "BadCredential",
	"NoAccess", "ContextTooLong", "BadRequest", "Transient", "Canceled",
}

// ErrUnknownClass is returned (wrapped) by ParseClass for a name that is not a
// Class.
var ErrUnknownClass = stderrors.New("tollgate: unknown error class")

// String returns the class name ("RateLimited"), as used in the fixtures,
// error types and Details.
func (c Class) String() string {
	if c < 0 || int(c) >= numClasses {
		return fmt.Sprintf("Class(%d)", int(c))
	}
	return classNames[c]
}

// ParseClass is the inverse of Class.String.
func ParseClass(s string) (Class, error) {
	for i, n := range classNames {
		if n == s {
			return Class(i), nil
		}
	}
	return Unknown, fmt.Errorf("%w: %q", ErrUnknownClass, s)
}

// Retryable reports whether a call that failed with class c may succeed if
// sent again unchanged: RateLimited, Overloaded, Transient and Unknown.
// QuotaExhausted is not: it is terminal for the activity and recovered by the
// workflow after Verdict.ResetAt.
func (c Class) Retryable() bool {
	switch c {
	case RateLimited, Overloaded, Transient, Unknown:
		return true
	}
	return false
}

// MarshalText encodes c by name, so Details stay readable and stable in
// workflow history.
func (c Class) MarshalText() ([]byte, error) {
	if c < 0 || int(c) >= numClasses {
		return nil, fmt.Errorf("%w: %d", ErrUnknownClass, int(c))
	}
	return []byte(classNames[c]), nil
}

// UnmarshalText decodes a name written by MarshalText.
func (c *Class) UnmarshalText(b []byte) error {
	v, err := ParseClass(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

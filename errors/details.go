package errors

import (
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Details is what a tollgate ApplicationError carries for the workflow, the
// single owner of recovery: decode it with DetailsOf. It holds no secret and
// no prompt text.
type Details struct {
	// Class is the verdict's class.
	Class Class `json:"class"`
	// Reason refines Class (ReasonDailyQuota, ReasonBilling, ...).
	Reason Reason `json:"reason,omitempty"`
	// Provider, Status and Code are the provider, HTTP status and provider
	// code of the failure.
	Provider capacity.Provider `json:"provider,omitempty"`
	Status   int               `json:"status,omitempty"`
	Code     string            `json:"code,omitempty"`
	// Scope is the quota scope's key (capacity.Scope.Key); empty if the
	// caller gave none.
	Scope string `json:"scope,omitempty"`
	// QuotaID is Gemini's quota id of the binding violation.
	QuotaID string `json:"quota_id,omitempty"`
	// Dimension is the binding dimension's name ("tokens"); see Dim.
	Dimension string `json:"dimension,omitempty"`
	// RetryAfter is the wait the provider asked for; zero if none.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// ResetAt is when an exhausted quota comes back; zero if unknown.
	ResetAt time.Time `json:"reset_at,omitzero"`
	// Limit and Requested are the budget and request size the provider
	// stated, if any.
	Limit     int64 `json:"limit,omitempty"`
	Requested int64 `json:"requested,omitempty"`
}

// DetailsFor returns the Details of verdict v on the scope with key scope.
func DetailsFor(v Verdict, scope string) Details {
	d := Details{
		Class:      v.Class,
		Reason:     v.Reason,
		Provider:   v.Provider,
		Status:     v.Status,
		Code:       sanitizeToken(v.Code),
		Scope:      scope,
		QuotaID:    sanitizeToken(v.QuotaID),
		RetryAfter: v.RetryAfter,
		ResetAt:    v.ResetAt,
		Limit:      v.Limit,
		Requested:  v.Requested,
	}
	if v.HasDimension {
		d.Dimension = v.Dimension.String()
	}
	return d
}

// Dim returns the binding dimension, if Details names a known one.
func (d Details) Dim() (capacity.Dimension, bool) {
	if d.Dimension == "" {
		return 0, false
	}
	dim, err := capacity.ParseDimension(d.Dimension)
	return dim, err == nil
}

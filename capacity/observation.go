package capacity

import "time"

// DimensionObservation is what a provider reported about one dimension. Each
// field is present only if its Has flag is set: unparseable values are
// ignored field by field.
type DimensionObservation struct {
	HasLimit     bool
	Limit        int64
	HasRemaining bool
	Remaining    int64
	HasReset     bool
	// ResetIn is the reset as a duration from the response's time (OpenAI's
	// reset is the time to refill what was used; Anthropic's is a timestamp,
	// converted relative to the response's date header). Never a refill rate.
	ResetIn time.Duration
	// InFlightExcluded says that Remaining does not count the calls still in
	// flight: the provider charges this dimension when a call completes
	// (Anthropic's output tokens). The store then discounts what its live
	// leases hold before it trusts the report.
	InFlightExcluded bool
}

// Observation is what one response's headers said about a scope's budgets.
type Observation struct {
	Provider Provider
	// Dims holds per-dimension reports, indexed by Dimension.
	Dims [NumDimensions]DimensionObservation
	// RetryAfter is the provider's requested wait (retry-after-ms, else
	// retry-after); zero if absent, zero or negative.
	RetryAfter time.Duration
	// Date is the response's date header, if parseable.
	Date time.Time
	// Mark is the Lease.Mark of the call whose response this is.
	Mark Mark
}

// Empty reports whether the observation carries nothing usable.
func (o Observation) Empty() bool {
	for _, d := range o.Dims {
		if d.HasLimit || d.HasRemaining || d.HasReset {
			return false
		}
	}
	return o.RetryAfter == 0
}

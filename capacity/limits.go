package capacity

import (
	"fmt"
	"math"
	"time"
)

// Limits are the budgets of one quota scope. A zero limit means unlimited.
// Values are as the provider states them; SafetyMargin scales them down.
type Limits struct {
	RequestsPerMinute     int64
	InputTokensPerMinute  int64
	OutputTokensPerMinute int64
	TokensPerMinute       int64 // combined input + output
	RequestsPerDay        int64
	TokensPerDay          int64
	MaxInFlight           int64

	// Burst is the capacity of each per-minute bucket as time at that
	// bucket's rate: capacity = rate × Burst (at least 1). If zero,
	// DefaultBurst. A single demand larger than a bucket's capacity but
	// within its per-minute limit waits until the bucket is full, then goes
	// (the bucket runs into debt); one larger than the limit is refused with
	// a *DemandTooLargeError.
	Burst time.Duration
	// TokenBurst, if set, is the minimum capacity of the per-minute token
	// buckets, for scopes whose single calls are larger than Burst's worth of
	// tokens. It raises the bound of the conformance invariant accordingly.
	TokenBurst int64
	// SafetyMargin is the fraction (0, 1] of every limit actually used.
	// If zero, DefaultSafetyMargin.
	SafetyMargin float64
	// DayReset says when per-day counters reset. The zero value is the
	// provider's own boundary when its profile has one
	// (accounting.ProfileDayReset; Gemini: midnight Pacific), else midnight
	// UTC; set Location to time.UTC to ask for UTC explicitly.
	DayReset DayBoundary

	// StandardFloor and BulkFloor protect higher classes: the fraction [0, 1)
	// of every budget (each bucket, the daily allowance, the in-flight slots)
	// that Standard, respectively Bulk, calls may not consume. Interactive
	// calls may use everything. In a continuously refilling bucket a floor
	// costs lower classes no steady-state throughput, only burst. Zero: no
	// floor. BulkFloor must be at least StandardFloor.
	StandardFloor float64
	BulkFloor     float64
	// AgingAfter lifts a waiting call one class (Bulk to Standard, Standard
	// to Interactive) for each AgingAfter it has waited since Request.Since,
	// so long-waiting work is not starved. Zero: no aging.
	AgingAfter time.Duration
}

// floor returns the fraction of every budget that class c may not consume.
func (l Limits) floor(c Class) float64 {
	switch c {
	case Standard:
		return l.StandardFloor
	case Bulk:
		return l.BulkFloor
	}
	return 0
}

// lift is the built-in classes' aging step (see aged): Bulk is lifted to
// Standard and Standard to Interactive after AgingAfter each.
func (l Limits) lift(c Class) (next Class, after time.Duration, ok bool) {
	switch c {
	case Bulk:
		return Standard, l.AgingAfter, true
	case Standard:
		return Interactive, l.AgingAfter, true
	}
	return c, 0, false
}

// DayBoundary is the daily reset time of per-day limits: midnight plus Offset
// in Location. Gemini resets at midnight Pacific:
// DayBoundary{Location: pacific}.
type DayBoundary struct {
	Location *time.Location // nil means UTC
	Offset   time.Duration  // in [0, 24h)
}

// Next returns the first reset boundary strictly after t.
func (b DayBoundary) Next(t time.Time) time.Time {
	loc := b.Location
	if loc == nil {
		loc = time.UTC
	}
	lt := t.In(loc)
	next := time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, loc).Add(b.Offset)
	if !next.After(t) {
		next = time.Date(lt.Year(), lt.Month(), lt.Day()+1, 0, 0, 0, 0, loc).Add(b.Offset)
	}
	return next
}

// Validate reports the first invalid field of l, by name.
func (l Limits) Validate() error {
	fields := []struct {
		name string
		v    int64
	}{
		{"RequestsPerMinute", l.RequestsPerMinute},
		{"InputTokensPerMinute", l.InputTokensPerMinute},
		{"OutputTokensPerMinute", l.OutputTokensPerMinute},
		{"TokensPerMinute", l.TokensPerMinute},
		{"RequestsPerDay", l.RequestsPerDay},
		{"TokensPerDay", l.TokensPerDay},
		{"MaxInFlight", l.MaxInFlight},
		{"TokenBurst", l.TokenBurst},
	}
	for _, f := range fields {
		if f.v < 0 {
			return fmt.Errorf("%w: %s is %d; want >= 0 (0 means unlimited)", ErrInvalidLimits, f.name, f.v)
		}
	}
	if l.Burst < 0 || l.Burst > 0 && l.Burst < MinBurst {
		return fmt.Errorf("%w: Burst is %v; want 0 (meaning %v) or from %v to 1m", ErrInvalidLimits, l.Burst, DefaultBurst, MinBurst)
	}
	if l.Burst > time.Minute {
		return fmt.Errorf("%w: Burst is %v; want <= 1m (a bucket holds at most a minute of rate)", ErrInvalidLimits, l.Burst)
	}
	if math.IsNaN(l.SafetyMargin) || l.SafetyMargin < 0 || l.SafetyMargin > 0 && l.SafetyMargin < MinSafetyMargin || l.SafetyMargin > 1 {
		return fmt.Errorf("%w: SafetyMargin is %v; want 0 (meaning %v) or in [%v, 1]", ErrInvalidLimits, l.SafetyMargin, DefaultSafetyMargin, MinSafetyMargin)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"StandardFloor", l.StandardFloor}, {"BulkFloor", l.BulkFloor}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v >= 1 {
			return fmt.Errorf("%w: %s is %v; want in [0, 1)", ErrInvalidLimits, f.name, f.v)
		}
	}
	if l.BulkFloor < l.StandardFloor {
		return fmt.Errorf("%w: BulkFloor %v is below StandardFloor %v; bulk work may not take more than standard work", ErrInvalidLimits, l.BulkFloor, l.StandardFloor)
	}
	if l.AgingAfter < 0 {
		return fmt.Errorf("%w: AgingAfter is %v; want >= 0 (0 means no aging)", ErrInvalidLimits, l.AgingAfter)
	}
	if l.DayReset.Offset < 0 || l.DayReset.Offset >= 24*time.Hour {
		return fmt.Errorf("%w: DayReset.Offset is %v; want in [0, 24h)", ErrInvalidLimits, l.DayReset.Offset)
	}
	return nil
}

// Limit returns the stated limit of dimension d (0: unlimited).
func (l Limits) Limit(d Dimension) int64 {
	switch d {
	case Requests:
		return l.RequestsPerMinute
	case InputTokens:
		return l.InputTokensPerMinute
	case OutputTokens:
		return l.OutputTokensPerMinute
	case Tokens:
		return l.TokensPerMinute
	case RequestsPerDay:
		return l.RequestsPerDay
	case TokensPerDay:
		return l.TokensPerDay
	case InFlight:
		return l.MaxInFlight
	}
	return 0
}

// SetLimit returns l with dimension d's stated limit set to v.
func (l Limits) SetLimit(d Dimension, v int64) Limits {
	switch d {
	case Requests:
		l.RequestsPerMinute = v
	case InputTokens:
		l.InputTokensPerMinute = v
	case OutputTokens:
		l.OutputTokensPerMinute = v
	case Tokens:
		l.TokensPerMinute = v
	case RequestsPerDay:
		l.RequestsPerDay = v
	case TokensPerDay:
		l.TokensPerDay = v
	case InFlight:
		l.MaxInFlight = v
	}
	return l
}

func (l Limits) margin() float64 {
	if l.SafetyMargin == 0 {
		return DefaultSafetyMargin
	}
	return l.SafetyMargin
}

func (l Limits) burst() time.Duration {
	if l.Burst == 0 {
		return DefaultBurst
	}
	return l.Burst
}

// Budget is the effective shape of one dimension after the safety margin and
// burst are applied: what a Store enforces.
type Budget struct {
	Limited bool
	// Rate is the refill rate in units per second (per-minute dimensions).
	Rate float64
	// Capacity is the bucket size (per-minute), the daily allowance (per-day)
	// or the number of slots (InFlight).
	Capacity float64
}

// Budgets returns the effective budget of every dimension.
//
// Per-minute: Rate = limit × margin / 60 s; Capacity = max(1, Rate × Burst),
// raised to TokenBurst for token buckets. Per-day: Capacity = limit × margin.
// InFlight: Capacity = MaxInFlight (no margin: it is a count of slots).
func (l Limits) Budgets() [NumDimensions]Budget {
	var b [NumDimensions]Budget
	m := l.margin()
	burst := l.burst().Seconds()
	for d := Requests; d <= Tokens; d++ {
		lim := l.Limit(d)
		if lim <= 0 {
			continue
		}
		rate := float64(lim) * m / 60
		c := math.Max(1, math.Floor(rate*burst))
		if d != Requests && float64(l.TokenBurst) > c {
			c = float64(l.TokenBurst)
		}
		b[d] = Budget{Limited: true, Rate: rate, Capacity: c}
	}
	for _, d := range []Dimension{RequestsPerDay, TokensPerDay} {
		if lim := l.Limit(d); lim > 0 {
			b[d] = Budget{Limited: true, Capacity: math.Max(1, math.Floor(float64(lim)*m))}
		}
	}
	if l.MaxInFlight > 0 {
		b[InFlight] = Budget{Limited: true, Capacity: float64(l.MaxInFlight)}
	}
	return b
}

// Admissible returns the largest charge a call may have in each dimension
// (0: any): a per-minute bucket admits any call within its limit (one larger
// than the bucket waits until the bucket is full: the provider serves a call
// up to its limit), a daily counter or the in-flight cap its capacity. A
// larger demand is refused with a *DemandTooLargeError.
func (l Limits) Admissible() [NumDimensions]float64 {
	var most [NumDimensions]float64
	for d, b := range l.Budgets() {
		switch {
		case !b.Limited:
		case Dimension(d).PerMinute():
			most[d] = math.Max(b.Capacity, float64(l.Limit(Dimension(d))))
		default:
			most[d] = b.Capacity
		}
	}
	return most
}

// DemandTooLargeError is returned by Store.Reserve for a demand that no
// configured limit can ever admit: more than a per-minute limit (a call
// larger than the bucket but within the limit waits until the bucket is
// full), a daily allowance or the in-flight cap. It is refused rather than
// queued; a provider-reported lower limit never causes it.
type DemandTooLargeError struct {
	Dimension Dimension
	Charge    int64
	// Capacity is the largest charge the dimension admits.
	Capacity float64
	// Key reports that the limit is the call's fairness key's
	// (Fairness.TokensPerDay), not the scope's.
	Key bool
}

func (e *DemandTooLargeError) Error() string {
	if e.Key {
		return fmt.Sprintf("capacity: a call of %d tokens exceeds its fairness key's tokens per day, %.0f (split the call, or raise the key's cap)",
			e.Charge, e.Capacity)
	}
	return fmt.Sprintf("capacity: a call of %d %s exceeds the largest the limit admits, %.0f (split the call, or raise the limit if the provider's is higher)",
		e.Charge, e.Dimension, e.Capacity)
}

// Is makes errors.Is(err, ErrDemandTooLarge) true.
func (e *DemandTooLargeError) Is(target error) bool { return target == ErrDemandTooLarge }

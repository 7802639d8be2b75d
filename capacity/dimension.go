package capacity

import "fmt"

// Dimension names one metered budget of a quota scope.
//
// The per-minute dimensions are continuously refilling token buckets, the
// per-day dimensions are counters that reset at a boundary, and InFlight is a
// concurrency cap (not a bucket: a slot is held while a lease is live).
type Dimension int

const (
	// Requests is requests per minute (RPM).
	Requests Dimension = iota
	// InputTokens is input tokens per minute (Anthropic ITPM).
	InputTokens
	// OutputTokens is output tokens per minute (Anthropic OTPM).
	OutputTokens
	// Tokens is combined tokens per minute (OpenAI TPM, Anthropic's combined view).
	Tokens
	// RequestsPerDay is requests per day (RPD).
	RequestsPerDay
	// TokensPerDay is tokens per day (TPD).
	TokensPerDay
	// InFlight is the number of calls dispatched and not yet finished.
	InFlight

	// NumDimensions is the number of dimensions; Charges is indexed by Dimension.
	NumDimensions = int(InFlight) + 1
)

// numBuckets is the number of per-minute bucket dimensions (Requests..Tokens).
const numBuckets = int(Tokens) + 1

var dimensionNames = [NumDimensions]string{
	"requests", "input_tokens", "output_tokens", "tokens",
	"requests_per_day", "tokens_per_day", "in_flight",
}

// String returns the dimension's stable snake_case name, as used in metrics,
// Redis fields and the fixtures ("requests", "input_tokens", ...).
func (d Dimension) String() string {
	if d < 0 || int(d) >= NumDimensions {
		return fmt.Sprintf("dimension(%d)", int(d))
	}
	return dimensionNames[d]
}

// ParseDimension is the inverse of Dimension.String.
func ParseDimension(s string) (Dimension, error) {
	for i, n := range dimensionNames {
		if n == s {
			return Dimension(i), nil
		}
	}
	return 0, fmt.Errorf("capacity: unknown dimension %q", s)
}

// PerMinute reports whether d is a continuously refilling per-minute bucket.
func (d Dimension) PerMinute() bool { return d >= Requests && d <= Tokens }

// PerDay reports whether d is a per-day counter.
func (d Dimension) PerDay() bool { return d == RequestsPerDay || d == TokensPerDay }

// Dimensions lists every dimension in index order.
func Dimensions() []Dimension {
	ds := make([]Dimension, NumDimensions)
	for i := range ds {
		ds[i] = Dimension(i)
	}
	return ds
}

// Charges is an amount per dimension, indexed by Dimension. The InFlight entry
// of a call's charges is 1 (it holds one slot). The zero value charges nothing.
type Charges [NumDimensions]int64

// Add returns c + o, dimension by dimension.
func (c Charges) Add(o Charges) Charges {
	for i := range c {
		c[i] += o[i]
	}
	return c
}

// Sub returns c - o, dimension by dimension.
func (c Charges) Sub(o Charges) Charges {
	for i := range c {
		c[i] -= o[i]
	}
	return c
}

// NonNegative returns c with every negative entry made zero.
func (c Charges) NonNegative() Charges {
	for i := range c {
		c[i] = max(c[i], 0)
	}
	return c
}

// IsZero reports whether every entry is zero.
func (c Charges) IsZero() bool { return c == Charges{} }

package testsuite

import (
	"fmt"
	"time"
)

// Dimension names one metered budget of a scope. Its String form matches the
// names tollgate's capacity package and the fixtures use.
type Dimension int

const (
	// Requests is requests per minute (RPM).
	Requests Dimension = iota
	// InputTokens is Anthropic's input tokens per minute (ITPM).
	InputTokens
	// OutputTokens is Anthropic's output tokens per minute (OTPM).
	OutputTokens
	// Tokens is OpenAI's tokens per minute (TPM).
	Tokens
	// RequestsPerDay is the daily request quota.
	RequestsPerDay
	// TokensPerDay is the daily token quota.
	TokensPerDay

	numDimensions
	numRate = int(Tokens) + 1
)

var dimensionNames = [numDimensions]string{
	"requests", "input_tokens", "output_tokens", "tokens", "requests_per_day", "tokens_per_day",
}

// String returns the dimension's snake_case name ("requests", "input_tokens", ...).
func (d Dimension) String() string {
	if d < 0 || d >= numDimensions {
		return fmt.Sprintf("dimension(%d)", int(d))
	}
	return dimensionNames[d]
}

// Daily reports whether d is a per-day quota rather than a per-minute bucket.
func (d Dimension) Daily() bool { return d == RequestsPerDay || d == TokensPerDay }

// Period returns the period d's limit is expressed in: a minute or a day.
func (d Dimension) Period() time.Duration {
	if d.Daily() {
		return 24 * time.Hour
	}
	return time.Minute
}

// Dimensions returns every dimension in order.
func Dimensions() []Dimension {
	ds := make([]Dimension, numDimensions)
	for i := range ds {
		ds[i] = Dimension(i)
	}
	return ds
}

// Charges holds one amount per Dimension, indexed by Dimension.
type Charges [numDimensions]int64

// Add returns c + o, dimension by dimension.
func (c Charges) Add(o Charges) Charges {
	for i := range c {
		c[i] += o[i]
	}
	return c
}

package testsuite

import (
	"fmt"
	"slices"
)

// HeadersTime is when an answer's rate-limit headers are computed.
// Providers differ, and say little: one that streams sends its headers
// before the answer exists, so they show the buckets as the request was
// admitted; one that computes them as it answers has counted every request
// admitted while the call ran. A client must keep to the limits under both
// (a report from the past; calls it sent since may or may not be in it).
type HeadersTime int

const (
	// HeadersAtAnswer computes the headers as the answer is written: the
	// buckets then, after the refill and the admissions while the call
	// ran (and, on Anthropic accounting, the call's own output). The
	// default.
	HeadersAtAnswer HeadersTime = iota
	// HeadersAtAdmission computes them as the request is admitted: the
	// buckets after its own charge, before any request admitted later.
	HeadersAtAdmission
)

// headersTimes are the defined HeadersTime values.
var headersTimes = []HeadersTime{HeadersAtAnswer, HeadersAtAdmission}

func (t HeadersTime) String() string {
	switch t {
	case HeadersAtAnswer:
		return "answer"
	case HeadersAtAdmission:
		return "admission"
	}
	return fmt.Sprintf("HeadersTime(%d)", int(t))
}

// MarshalText returns the name of t ("answer", "admission").
func (t HeadersTime) MarshalText() ([]byte, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	return []byte(t.String()), nil
}

// UnmarshalText sets t from its name ("answer" or "admission"), for flags
// (flag.TextVar) and configuration files.
func (t *HeadersTime) UnmarshalText(b []byte) error {
	for _, c := range headersTimes {
		if string(b) == c.String() {
			*t = c
			return nil
		}
	}
	return fmt.Errorf("testsuite: unknown HeadersTime %q (answer or admission)", b)
}

func (t HeadersTime) validate() error {
	if !slices.Contains(headersTimes, t) {
		return fmt.Errorf("testsuite: unknown HeadersAt %v", t)
	}
	return nil
}

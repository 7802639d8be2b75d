package headers

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// epochFrom is where a number stops being a wait and becomes a point in
// time: a wait of 10⁹ seconds would be 31.7 years, while 10⁹ seconds after
// the Unix epoch is 2001-09-09. A number at least this large (in the unit
// its header or message states waits in) is an epoch time; one of at least
// epochMillisFrom is in milliseconds (10¹² ms after the epoch is also
// 2001-09-09), a smaller one in seconds.
const (
	epochFrom       = 1e9 * time.Second
	epochMillisFrom = 1e12
)

// ParseReset reads a wait or a reset time in any form providers, and the
// gateways in front of them, send in a header or a message, and returns the
// wait from ref (the response's date) until then:
//
//   - a duration with units, as time.ParseDuration reads it without a sign,
//     plus "d" for days: "57.5s", "6m0s", "23h47m36.648s";
//   - a number without a unit, possibly fractional: a wait in unit (seconds
//     for retry-after and reset headers, milliseconds for retry-after-ms),
//     unless it is too large to be one (a wait of 31.7 years or more), when
//     it is a Unix time: in milliseconds from 10¹², else in seconds;
//   - an HTTP date ("Thu, 15 Oct 2026 12:00:30 GMT" and the older forms
//     http.ParseTime reads);
//   - an RFC 3339 time ("2026-10-15T12:00:30Z", fractions and offsets
//     allowed).
//
// ok is false for anything else, for a value that overflows a
// time.Duration, and for a wait that is not positive (a time at or before
// ref). ParseReset never panics; it does not bound the wait, which callers
// cut to what its kind of budget can mean.
func ParseReset(v string, unit time.Duration, ref time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" || unit <= 0 {
		return 0, false
	}
	if n, ok := parseNumber(v); ok {
		return numberWait(n, unit, ref)
	}
	if d, ok := ParseDuration(v); ok {
		return positive(d)
	}
	return parseTime(v, ref)
}

// parseTime reads an HTTP date or an RFC 3339 time as a wait from ref. HTTP
// dates open with a weekday, RFC 3339 times with a digit: telling them
// apart first keeps a well-formed reset from allocating a parse error.
func parseTime(v string, ref time.Time) (time.Duration, bool) {
	var t time.Time
	var err error
	if isDigit(v[0]) {
		t, err = time.Parse(time.RFC3339, v)
	} else {
		t, err = http.ParseTime(v)
	}
	if err != nil {
		return 0, false
	}
	return until(t, ref)
}

// numberWait is the wait a unit-less number n states: n units, or a Unix
// time if that would be a wait of epochFrom or more.
func numberWait(n float64, unit time.Duration, ref time.Time) (time.Duration, bool) {
	if ns := n * float64(unit); ns < float64(epochFrom) {
		return positive(time.Duration(ns))
	}
	if n >= epochMillisFrom {
		return until(unixFloat(n/1e3), ref)
	}
	return until(unixFloat(n), ref)
}

// maxDurationF is the largest time.Duration as a float, rounded down so that
// converting anything below it back to int64 cannot overflow.
const maxDurationF = float64(1<<63 - 1024)

// unixFloat is the time sec seconds after the Unix epoch, or the zero time
// if that is past what a time.Duration from now can reach.
func unixFloat(sec float64) time.Time {
	if sec >= maxDurationF/float64(time.Second) {
		return time.Time{}
	}
	whole := int64(sec)
	return time.Unix(whole, int64((sec-float64(whole))*1e9))
}

// until is the positive wait from ref to t; a zero t is no reset.
func until(t, ref time.Time) (time.Duration, bool) {
	if t.IsZero() {
		return 0, false
	}
	return positive(t.Sub(ref))
}

// positive is d as a wait: absent unless positive.
func positive(d time.Duration) (time.Duration, bool) {
	if d <= 0 {
		return 0, false
	}
	return d, true
}

// parseNumber parses a non-negative decimal number: digits and at most one
// point, no sign or exponent.
func parseNumber(v string) (float64, bool) {
	if v == "" || v == "." {
		return 0, false
	}
	dots := 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '.':
			dots++
		case !isDigit(c):
			return 0, false
		}
	}
	if dots > 1 {
		return 0, false
	}
	n, err := strconv.ParseFloat(v, 64)
	return n, err == nil
}

package capacity

import (
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// headerName is a response header looked up without allocating: by its
// canonical form (how net/http stores received headers) and, for headers
// built by hand, by its lower-case form.
type headerName struct{ canon, lower string }

func newHeaderName(lower string) headerName {
	return headerName{canon: textproto.CanonicalMIMEHeaderKey(lower), lower: lower}
}

func (n headerName) get(h http.Header) string {
	if v := h[n.canon]; len(v) > 0 {
		return v[0]
	}
	if v := h[n.lower]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// dimensionHeaders names the limit, remaining and reset headers of one
// dimension.
type dimensionHeaders struct {
	dim                     Dimension
	limit, remaining, reset headerName
}

var (
	headerDate         = newHeaderName("date")
	headerRetryAfter   = newHeaderName("retry-after")
	headerRetryAfterMs = newHeaderName("retry-after-ms")

	// openAIHeaders are x-ratelimit-{limit,remaining,reset}-{requests,tokens};
	// resets are durations ("6m0s").
	openAIHeaders = []dimensionHeaders{
		openAIDimension(Requests, "requests"),
		openAIDimension(Tokens, "tokens"),
	}
	// anthropicHeaders are anthropic-ratelimit-<dim>-{limit,remaining,reset};
	// resets are RFC 3339 timestamps.
	anthropicHeaders = []dimensionHeaders{
		anthropicDimension(Requests, "requests"),
		anthropicDimension(Tokens, "tokens"),
		anthropicDimension(InputTokens, "input-tokens"),
		anthropicDimension(OutputTokens, "output-tokens"),
	}
)

func openAIDimension(d Dimension, name string) dimensionHeaders {
	return dimensionHeaders{
		dim:       d,
		limit:     newHeaderName("x-ratelimit-limit-" + name),
		remaining: newHeaderName("x-ratelimit-remaining-" + name),
		reset:     newHeaderName("x-ratelimit-reset-" + name),
	}
}

func anthropicDimension(d Dimension, name string) dimensionHeaders {
	return dimensionHeaders{
		dim:       d,
		limit:     newHeaderName("anthropic-ratelimit-" + name + "-limit"),
		remaining: newHeaderName("anthropic-ratelimit-" + name + "-remaining"),
		reset:     newHeaderName("anthropic-ratelimit-" + name + "-reset"),
	}
}

// ParseHeaders reads what one response's headers say about the budgets of a
// scope of provider p, as of the response's date header (now if absent).
//
// OpenAI's x-ratelimit-* headers fill Requests and Tokens (resets are
// durations such as "57.5s" or "23h47m36.648s"); Anthropic's
// anthropic-ratelimit-* headers fill Requests, Tokens, InputTokens and
// OutputTokens (resets are RFC 3339 times, read relative to the date header);
// Gemini sends none. A provider tollgate does not know is read with both
// families, as OpenAI-compatible services use OpenAI's. RetryAfter comes from
// ParseRetryAfter.
//
// Every field is parsed on its own: a value that does not parse, a negative
// remaining, a limit that is not positive, or a reset that is not in the
// future is left out (its Has flag is false), never guessed. ParseHeaders
// never panics and does not allocate on well-formed headers.
func ParseHeaders(p Provider, h http.Header, now time.Time) Observation {
	obs := Observation{Provider: p}
	ref := now
	if d, ok := parseDate(h); ok {
		obs.Date = d
		ref = d
	}
	switch p {
	case OpenAI:
		parseDimensions(&obs, h, ref, openAIHeaders, parseDurationReset)
	case Anthropic:
		parseDimensions(&obs, h, ref, anthropicHeaders, parseTimestampReset)
	case Gemini:
	default:
		parseDimensions(&obs, h, ref, openAIHeaders, parseDurationReset)
		parseDimensions(&obs, h, ref, anthropicHeaders, parseTimestampReset)
	}
	if p != OpenAI {
		// Anthropic meters output as it is produced: its remaining output
		// tokens, and its combined tokens, do not count the calls in flight
		// (nor, for a provider tollgate does not know, are they assumed to).
		for _, d := range []Dimension{OutputTokens, Tokens} {
			obs.Dims[d].InFlightExcluded = obs.Dims[d].HasRemaining
		}
	}
	if d, ok := retryAfter(h, ref); ok {
		obs.RetryAfter = d
	}
	return obs
}

// resetParser turns a reset header value into a wait from ref.
type resetParser func(v string, ref time.Time) (time.Duration, bool)

func parseDimensions(obs *Observation, h http.Header, ref time.Time, dims []dimensionHeaders, reset resetParser) {
	for _, dh := range dims {
		d := &obs.Dims[dh.dim]
		if n, ok := parseCount(dh.limit.get(h)); ok && n > 0 {
			d.HasLimit, d.Limit = true, n
		}
		if n, ok := parseCount(dh.remaining.get(h)); ok {
			d.HasRemaining, d.Remaining = true, n
		}
		if v := dh.reset.get(h); v != "" {
			if w, ok := reset(v, ref); ok && w > 0 {
				d.HasReset, d.ResetIn = true, w
			}
		}
	}
}

func parseDurationReset(v string, _ time.Time) (time.Duration, bool) {
	return ParseDuration(strings.TrimSpace(v))
}

func parseTimestampReset(v string, ref time.Time) (time.Duration, bool) {
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
	if err != nil {
		return 0, false
	}
	return t.Sub(ref), true
}

// parseCount parses a non-negative decimal count.
func parseCount(v string) (int64, bool) {
	v = strings.TrimSpace(v)
	if v == "" || !allDigits(v) {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func parseDate(h http.Header) (time.Time, bool) {
	v := headerDate.get(h)
	if v == "" {
		return time.Time{}, false
	}
	t, err := http.ParseTime(v)
	return t, err == nil
}

// ResponseTime returns the time of a response: its date header if present
// and parseable, else now. Waits stated as absolute times are read relative
// to it, so a skewed local clock does not skew them.
func ResponseTime(h http.Header, now time.Time) time.Time {
	if d, ok := parseDate(h); ok {
		return d
	}
	return now
}

// ParseRetryAfter returns the wait a response asks for: retry-after-ms
// (milliseconds, possibly fractional) if present and positive, else
// retry-after as seconds (possibly fractional) or as an HTTP-date read
// relative to the response's date header (now if absent). A zero, negative
// or unparseable value counts as absent: ok is false.
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	return retryAfter(h, ResponseTime(h, now))
}

func retryAfter(h http.Header, ref time.Time) (time.Duration, bool) {
	if d, ok := parseScaled(retryAfterMs(h), float64(time.Millisecond)); ok && d > 0 {
		return d, true
	}
	v := strings.TrimSpace(headerRetryAfter.get(h))
	if v == "" {
		return 0, false
	}
	d, ok := parseScaled(v, float64(time.Second))
	if !ok {
		t, err := http.ParseTime(v)
		if err != nil {
			return 0, false
		}
		d = t.Sub(ref)
	}
	if d <= 0 {
		return 0, false
	}
	return d, true
}

func retryAfterMs(h http.Header) string {
	return strings.TrimSpace(headerRetryAfterMs.get(h))
}

// maxDurationF is the largest time.Duration as a float, rounded down so that
// converting anything below it back to int64 cannot overflow.
const maxDurationF = float64(1<<63 - 1024)

// parseScaled parses a non-negative decimal number (digits and at most one
// point, no sign or exponent) times unit nanoseconds.
func parseScaled(v string, unit float64) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	dots := 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '.':
			dots++
		case c < '0' || c > '9':
			return 0, false
		}
	}
	if dots > 1 || v == "." {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, false
	}
	ns := f * unit
	if ns >= maxDurationF {
		return 0, false
	}
	return time.Duration(ns), true
}

// ParseDuration parses a duration in the form of time.ParseDuration without
// a sign ("12ms", "57.5s", "6m0s", "23h47m36.648s"), plus a "d" unit of 24
// hours. It is how OpenAI states resets and how providers say "try again in
// 1.209s". It reports false for anything else, including overflow, and never
// allocates.
func ParseDuration(s string) (time.Duration, bool) {
	if s == "" {
		return 0, false
	}
	const maxInt = 1<<63 - 1
	var total uint64
	for s != "" {
		i := 0
		var v uint64
		for ; i < len(s) && isDigit(s[i]); i++ {
			if v > (maxInt-9)/10 {
				return 0, false
			}
			v = v*10 + uint64(s[i]-'0')
		}
		whole := i > 0
		var frac, scale uint64 = 0, 1
		fraction := false
		if i < len(s) && s[i] == '.' {
			i++
			start := i
			for ; i < len(s) && isDigit(s[i]); i++ {
				if scale < 1e18 {
					frac = frac*10 + uint64(s[i]-'0')
					scale *= 10
				}
			}
			fraction = i > start
		}
		if !whole && !fraction {
			return 0, false
		}
		j := i
		for ; j < len(s) && s[j] != '.' && !isDigit(s[j]); j++ {
		}
		unit, ok := durationUnit(s[i:j])
		if !ok || v > maxInt/unit {
			return 0, false
		}
		v *= unit
		if frac > 0 {
			v += uint64(float64(frac) * (float64(unit) / float64(scale)))
			if v > maxInt {
				return 0, false
			}
		}
		total += v
		if total > maxInt {
			return 0, false
		}
		s = s[j:]
	}
	return time.Duration(total), true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func durationUnit(u string) (uint64, bool) {
	switch u {
	case "ns":
		return uint64(time.Nanosecond), true
	case "us", "µs", "μs":
		return uint64(time.Microsecond), true
	case "ms":
		return uint64(time.Millisecond), true
	case "s":
		return uint64(time.Second), true
	case "m":
		return uint64(time.Minute), true
	case "h":
		return uint64(time.Hour), true
	case "d":
		return uint64(24 * time.Hour), true
	}
	return 0, false
}

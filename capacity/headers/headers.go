package headers

import (
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
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
	dim                     capacity.Dimension
	limit, remaining, reset headerName
}

var (
	headerDate         = newHeaderName("date")
	headerRetryAfter   = newHeaderName("retry-after")
	headerRetryAfterMs = newHeaderName("retry-after-ms")

	// openAIHeaders are x-ratelimit-{limit,remaining,reset}-{requests,tokens};
	// resets are durations ("6m0s").
	openAIHeaders = []dimensionHeaders{
		openAIDimension(capacity.Requests, "requests"),
		openAIDimension(capacity.Tokens, "tokens"),
	}
	// anthropicHeaders are anthropic-ratelimit-<dim>-{limit,remaining,reset};
	// resets are RFC 3339 timestamps.
	anthropicHeaders = []dimensionHeaders{
		anthropicDimension(capacity.Requests, "requests"),
		anthropicDimension(capacity.Tokens, "tokens"),
		anthropicDimension(capacity.InputTokens, "input-tokens"),
		anthropicDimension(capacity.OutputTokens, "output-tokens"),
	}
)

func openAIDimension(d capacity.Dimension, name string) dimensionHeaders {
	return dimensionHeaders{
		dim:       d,
		limit:     newHeaderName("x-ratelimit-limit-" + name),
		remaining: newHeaderName("x-ratelimit-remaining-" + name),
		reset:     newHeaderName("x-ratelimit-reset-" + name),
	}
}

func anthropicDimension(d capacity.Dimension, name string) dimensionHeaders {
	return dimensionHeaders{
		dim:       d,
		limit:     newHeaderName("anthropic-ratelimit-" + name + "-limit"),
		remaining: newHeaderName("anthropic-ratelimit-" + name + "-remaining"),
		reset:     newHeaderName("anthropic-ratelimit-" + name + "-reset"),
	}
}

// Parse reads what one response's headers say about the budgets of a
// scope of provider p, as of the response's date header (now if absent).
//
// OpenAI's x-ratelimit-* headers fill Requests and Tokens (OpenAI states
// resets as durations such as "57.5s" or "23h47m36.648s"); Anthropic's
// anthropic-ratelimit-* headers fill Requests, Tokens, InputTokens and
// OutputTokens (Anthropic states resets as RFC 3339 times); Gemini sends
// none. Every reset header is read in any form ParseReset reads, as gateways
// in front of a provider send other forms under the same names; times are
// read relative to the date header. A provider tollgate does not know is read with both
// families, as OpenAI-compatible services use OpenAI's. RetryAfter comes from
// RetryAfter.
//
// Every field is parsed on its own: a value that does not parse, a negative
// remaining, a limit that is not positive, or a reset that is not in the
// future is left out (its Has flag is false), never guessed. Parse
// never panics and does not allocate on well-formed headers.
func Parse(p capacity.Provider, h http.Header, now time.Time) capacity.Observation {
	obs := capacity.Observation{Provider: p}
	ref := now
	if d, ok := parseDate(h); ok {
		obs.Date = d
		ref = d
	}
	switch p {
	case capacity.OpenAI:
		parseDimensions(&obs, h, ref, openAIHeaders)
	case capacity.Anthropic:
		parseDimensions(&obs, h, ref, anthropicHeaders)
	case capacity.Gemini:
	default:
		parseDimensions(&obs, h, ref, openAIHeaders)
		parseDimensions(&obs, h, ref, anthropicHeaders)
	}
	if p != capacity.OpenAI {
		// Anthropic meters output as it is produced: its remaining output
		// tokens, and its combined tokens, do not count the calls in flight
		// (nor, for a provider tollgate does not know, are they assumed to).
		for _, d := range []capacity.Dimension{capacity.OutputTokens, capacity.Tokens} {
			obs.Dims[d].InFlightExcluded = obs.Dims[d].HasRemaining
		}
	}
	if d, ok := retryAfter(h, ref); ok {
		obs.RetryAfter = d
	}
	return obs
}

func parseDimensions(obs *capacity.Observation, h http.Header, ref time.Time, dims []dimensionHeaders) {
	for _, dh := range dims {
		d := &obs.Dims[dh.dim]
		if n, ok := parseCount(dh.limit.get(h)); ok && n > 0 {
			d.HasLimit, d.Limit = true, n
		}
		if n, ok := parseCount(dh.remaining.get(h)); ok {
			d.HasRemaining, d.Remaining = true, n
		}
		if w, ok := ParseReset(dh.reset.get(h), time.Second, ref); ok {
			d.HasReset, d.ResetIn = true, w
		}
	}
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

// RetryAfter returns the wait a response asks for: retry-after-ms
// (milliseconds) if present and positive, else retry-after (seconds), each
// in any form ParseReset reads, times relative to the response's date header
// (now if absent). A zero, negative or unparseable value counts as absent:
// ok is false.
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	return retryAfter(h, ResponseTime(h, now))
}

func retryAfter(h http.Header, ref time.Time) (time.Duration, bool) {
	if d, ok := ParseReset(headerRetryAfterMs.get(h), time.Millisecond, ref); ok {
		return d, true
	}
	return ParseReset(headerRetryAfter.get(h), time.Second, ref)
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

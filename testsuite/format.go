package testsuite

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// ceilDuration rounds d up to a multiple of unit.
func ceilDuration(d, unit time.Duration) time.Duration {
	if r := d % unit; r != 0 {
		d += unit - r
	}
	return d
}

// openaiDuration renders a wait as OpenAI does in x-ratelimit-reset-* and in
// "Please try again in ...": Go duration syntax at millisecond precision,
// rounded up ("12ms", "1.5s", "6m0s").
func openaiDuration(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	return ceilDuration(d, time.Millisecond).String()
}

// anthropicTime renders now+d as Anthropic's reset headers do: RFC 3339 in
// UTC, at millisecond precision, rounded up.
func anthropicTime(now time.Time, d time.Duration) string {
	t := now.Add(max(d, 0)).UTC()
	if r := t.Sub(t.Truncate(time.Millisecond)); r != 0 {
		t = t.Add(time.Millisecond - r)
	}
	return t.Format(time.RFC3339Nano)
}

// commas renders n with thousands separators, as Anthropic's messages do.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3+1)
	if neg {
		out = append(out, '-')
	}
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// marshal encodes v as JSON without HTML escaping ("<", ">" and "&" stay
// as they are, as the providers send them).
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the fake's own types always encode
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

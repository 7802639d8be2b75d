// Package secrets recognizes credentials by their shape, so that tollgate
// neither keeps one in a message nor accepts one as a name. It is the one
// detector behind capacity.Scope.Validate (names that land in Redis keys and
// metrics) and errors.MaskSecrets (provider messages).
//
// A key is found only where a word starts (at the start of the string or
// after a byte other than a letter, digit, '-' or '_'), and is a token: a
// run of letters, digits, '-', '_', '*' and inner dots. A token is a key when
//
//   - it starts with a long key prefix (sk-proj-, sk-svcacct-, sk-admin-,
//     sk-ant-…, sk-or-v1-, github_pat_) followed by anything, or with a
//     short one (sk-, AIza, eyJ for JWTs and other encoded JSON, ghp_ and the
//     other GitHub token prefixes, Slack's xox?-) followed by 8 or more bytes;
//     a body Mask wrote ("****" or "****wxyz") is not a key;
//   - it starts with a prefix that also begins ordinary names (Groq gsk_, xAI
//     xai-, Hugging Face hf_) followed by 20 or more letters and digits,
//     with a digit or both cases;
//   - it is an AWS access key id: AKIA or ASIA and 16 upper-case letters or
//     digits;
//   - it is a long random token: 32 or more letters, digits, '-' and '_',
//     at most one separator per 8 bytes, with a letter and a digit, and
//     either hex, mixed case, or at least four digits making a tenth of it.
//
// Besides tokens, the value after "Bearer " and after a secret query or form
// parameter (key=, api_key=, apikey=, access_token=, token=) is a secret.
//
// Model names ("gpt-4o-mini", "claude-sonnet-4-5-20250929"), regions
// ("us-east-1"), credential names ("team-a", "prod/eu"), Fingerprint-style
// names ("fp-" and 24 hex digits) and a bare "sk-" or "sk-" and a short word
// are not keys. testdata/keys.json lists the cases.
package secrets

import "strings"

// masked replaces the secret part of a key.
const masked = "****"

// Span is the byte range [Start, End) of a secret in a string.
type Span struct {
	Start, End int
}

// LooksLikeKey reports whether name holds anything with the shape of a
// credential (see the package documentation), so that it must not be used
// as a name.
func LooksLikeKey(name string) bool {
	found := false
	scan(name, func(int, match) bool {
		found = true
		return false
	})
	return found
}

// Find returns the spans of the secrets in s, in order. Each span covers the
// whole key, including a prefix or label Mask keeps.
func Find(s string) []Span {
	var spans []Span
	scan(s, func(i int, m match) bool {
		spans = append(spans, Span{Start: i, End: i + m.n})
		return true
	})
	return spans
}

// Mask returns s with every secret Find reports masked: a key keeps its
// well-known prefix and its last four characters ("sk-proj-****wxyz"), a long
// random token keeps its last four ("****8e0f"), and the value of a bearer
// token or secret parameter is replaced whole ("Bearer ****", "key=****").
// Mask returns s itself when it holds no secret; its result holds none, so
// masking is idempotent.
func Mask(s string) string {
	var b strings.Builder
	last := 0
	scan(s, func(i int, m match) bool {
		if b.Len() == 0 {
			b.Grow(len(s))
		}
		b.WriteString(s[last : i+m.keep])
		b.WriteString(masked)
		if m.tail {
			b.WriteString(s[i+m.n-4 : i+m.n])
		}
		last = i + m.n
		return true
	})
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// match describes a secret at a word start: n bytes long, of which the first
// keep bytes (a prefix or label) stay, and, if tail, the last four too.
type match struct {
	n, keep int
	tail    bool
}

// scan calls f with each secret in s, left to right, until f returns false.
func scan(s string, f func(i int, m match) bool) {
	for i := 0; i < len(s); {
		if i > 0 && isTokenByte(s[i-1]) {
			i++
			continue
		}
		m, ok := matchAt(s[i:])
		if !ok {
			i++
			continue
		}
		if !f(i, m) {
			return
		}
		i += m.n
	}
}

// labels precede a secret value that is masked whole, whatever its shape.
var labels = []string{"bearer ", "key=", "api_key=", "apikey=", "access_token=", "token="}

// matchAt reports whether s starts with a secret.
func matchAt(s string) (match, bool) {
	for _, l := range labels {
		if len(s) > len(l) && strings.EqualFold(s[:len(l)], l) {
			v := tokenLen(s[len(l):])
			if v == 0 || s[len(l):len(l)+v] == masked {
				return match{}, false
			}
			return match{n: len(l) + v, keep: len(l)}, true
		}
	}
	n := tokenLen(s)
	if n == 0 {
		return match{}, false
	}
	tok := s[:n]
	for _, f := range formats {
		if strings.HasPrefix(tok, f.prefix) {
			body := tok[len(f.prefix):]
			if !f.isKey(body) {
				return match{}, false
			}
			return match{n: n, keep: len(f.prefix), tail: len(body) >= 8 && isAlnum(body[len(body)-4:])}, true
		}
	}
	if isRandom(tok) {
		return match{n: n, tail: true}, true
	}
	return match{}, false
}

// A format is a key family: its prefix and the body that must follow it.
type format struct {
	prefix  string
	min     int               // shortest body
	max     int               // longest body; 0 for no limit
	accepts func(string) bool // the body's shape; nil for any token
}

func (f format) isKey(body string) bool {
	if len(body) < f.min || f.max > 0 && len(body) > f.max {
		return false
	}
	if f.accepts == nil {
		return !isMasked(body)
	}
	return f.accepts(body)
}

// formats are the key families, longest prefix first within a family: the
// first prefix a token starts with decides.
var formats = []format{
	// Anthropic, OpenAI, OpenRouter: the long prefixes are keys whatever
	// follows; "sk-" needs a body no short word has.
	{prefix: "sk-ant-admin01-", min: 1},
	{prefix: "sk-ant-api03-", min: 1},
	{prefix: "sk-ant-oat01-", min: 1},
	{prefix: "sk-ant-", min: 1},
	{prefix: "sk-proj-", min: 1},
	{prefix: "sk-svcacct-", min: 1},
	{prefix: "sk-admin-", min: 1},
	{prefix: "sk-or-v1-", min: 1},
	{prefix: "sk-", min: 8},
	// Google API keys; JWTs and other base64-encoded JSON.
	{prefix: "AIza", min: 8},
	{prefix: "eyJ", min: 8},
	// GitHub.
	{prefix: "github_pat_", min: 1},
	{prefix: "ghp_", min: 8},
	{prefix: "gho_", min: 8},
	{prefix: "ghu_", min: 8},
	{prefix: "ghs_", min: 8},
	{prefix: "ghr_", min: 8},
	// Slack.
	{prefix: "xoxa-", min: 8},
	{prefix: "xoxb-", min: 8},
	{prefix: "xoxe-", min: 8},
	{prefix: "xoxp-", min: 8},
	{prefix: "xoxr-", min: 8},
	{prefix: "xoxs-", min: 8},
	// Prefixes that also begin ordinary names: Groq, xAI, Hugging Face.
	{prefix: "gsk_", min: 20, accepts: isRandomAlnum},
	{prefix: "xai-", min: 20, accepts: isRandomAlnum},
	{prefix: "hf_", min: 20, accepts: isRandomAlnum},
	// AWS access key ids (long-term and temporary).
	{prefix: "AKIA", min: 16, max: 16, accepts: isUpperAlnum},
	{prefix: "ASIA", min: 16, max: 16, accepts: isUpperAlnum},
}

// minRandomLen is the length from which a token without a known prefix may
// be a key.
const minRandomLen = 32

// isRandom reports whether tok looks machine-made (a hex key, a session
// token): only letters, digits, '-' and '_', at least minRandomLen of them,
// few separators (so that long dashed names and snapshot dates are kept),
// a letter and a digit, and either all hex, mixed case, or a tenth digits
// (so that long words such as Gemini quota ids are kept).
func isRandom(tok string) bool {
	if len(tok) < minRandomLen {
		return false
	}
	seps, digits, upper, lower, hex := 0, 0, 0, 0, true
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c >= 'a' && c <= 'z':
			lower++
			hex = hex && c <= 'f'
		case c >= 'A' && c <= 'Z':
			upper++
			hex = hex && c <= 'F'
		case c == '-' || c == '_':
			seps++
		default:
			return false
		}
	}
	letters := upper + lower
	if seps*8 > len(tok) || letters == 0 || digits == 0 {
		return false
	}
	return hex || isMixedCase(upper, lower) || digits >= 4 && digits*10 >= len(tok)
}

// isMixedCase reports whether upper- and lower-case letters each make at
// least a quarter of the letters, as in random base62 and not in CamelCase.
func isMixedCase(upper, lower int) bool {
	letters := upper + lower
	return upper*4 >= letters && lower*4 >= letters
}

// isRandomAlnum reports whether s is letters and digits only, with a digit
// or both cases.
func isRandomAlnum(s string) bool {
	digits, upper, lower := 0, 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c >= 'a' && c <= 'z':
			lower++
		case c >= 'A' && c <= 'Z':
			upper++
		default:
			return false
		}
	}
	return digits > 0 || upper > 0 && lower > 0
}

func isUpperAlnum(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// isMasked reports whether body is what Mask leaves of a key's body: the
// mask and up to four characters (fewer where a message was cut short).
func isMasked(body string) bool {
	return strings.HasPrefix(body, masked) && len(body) <= len(masked)+4 && isAlnum(body[len(masked):])
}

// tokenLen is the length of the key-like token at the start of s: letters,
// digits, '-', '_', '*' and inner dots (a trailing dot ends a sentence).
func tokenLen(s string) int {
	n := 0
	for n < len(s) && (isTokenByte(s[n]) || s[n] == '*' || s[n] == '.') {
		n++
	}
	for n > 0 && s[n-1] == '.' {
		n--
	}
	return n
}

func isTokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func isAlnum(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

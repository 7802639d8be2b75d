package errors

import (
	"strings"
	"unicode/utf8"
)

const (
	// maxMessageLen bounds the provider message a Verdict keeps, in bytes.
	maxMessageLen = 320
	// maxTokenLen bounds a provider code or quota id, in bytes.
	maxTokenLen = 128
	// maxScanLen bounds how much of a message or body is read at all.
	maxScanLen = 4096
	// maxQuotedLen is the longest quoted string kept from a message; longer
	// ones may be echoed input and are elided.
	maxQuotedLen = 32
	// minOpaqueLen is the length from which an unbroken run of letters and
	// digits is taken for a token (a key, a session id) and masked.
	minOpaqueLen = 32
	// mask replaces the secret part of a token.
	mask = "****"
)

// secretPrefixes are the prefixes of provider API keys, longest first within
// each family; a key keeps its prefix and its last four characters.
var secretPrefixes = []string{
	"sk-ant-admin01-", "sk-ant-api03-", "sk-ant-oat01-", "sk-ant-",
	"sk-proj-", "sk-svcacct-", "sk-admin-", "sk-or-v1-", "sk-",
	"AIza", "eyJ",
}

// secretParams are query or form parameters whose values are secrets.
var secretParams = []string{"key=", "api_key=", "apikey=", "access_token=", "token="}

// MaskSecrets returns s with API keys and bearer tokens masked: a key keeps
// its well-known prefix and its last four characters ("Incorrect API key
// provided: sk-proj-abc...wxyz" becomes "... sk-proj-****wxyz"), bearer
// tokens and secret query parameters lose their value, and any other opaque
// token of 32 or more characters with many digits (a hex id, a session
// token) keeps only its last four. It adds nothing to s, and masking a
// masked string changes nothing.
func MaskSecrets(s string) string {
	if !mayHoldSecret(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if i > 0 && isTokenByte(s[i-1]) {
			b.WriteByte(s[i])
			i++
			continue
		}
		if n := maskAt(&b, s[i:]); n > 0 {
			i += n
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// mayHoldSecret is a cheap pre-check that lets most messages through
// untouched.
func mayHoldSecret(s string) bool {
	if strings.Contains(s, "sk-") || strings.Contains(s, "AIza") || strings.Contains(s, "eyJ") ||
		strings.Contains(s, "=") || strings.Contains(strings.ToLower(s), "bearer") {
		return true
	}
	run := 0
	for i := 0; i < len(s); i++ {
		if isTokenByte(s[i]) {
			run++
			if run >= minOpaqueLen {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

// maskAt writes the masked form of a secret starting at s[0] and returns how
// many bytes of s it consumed, or 0 if s does not start with a secret.
func maskAt(b *strings.Builder, s string) int {
	if len(s) >= 7 && strings.EqualFold(s[:7], "bearer ") {
		n := 7 + tokenLen(s[7:])
		if n == 7 {
			return 0
		}
		b.WriteString(s[:7])
		b.WriteString(mask)
		return n
	}
	for _, p := range secretParams {
		if len(s) > len(p) && strings.EqualFold(s[:len(p)], p) {
			n := len(p) + tokenLen(s[len(p):])
			if n == len(p) {
				return 0
			}
			b.WriteString(s[:len(p)])
			b.WriteString(mask)
			return n
		}
	}
	n := tokenLen(s)
	if n == 0 {
		return 0
	}
	tok := s[:n]
	for _, p := range secretPrefixes {
		if strings.HasPrefix(tok, p) {
			b.WriteString(p)
			b.WriteString(mask)
			if rest := tok[len(p):]; len(rest) >= 8 && isAlnum(rest[len(rest)-4:]) {
				b.WriteString(rest[len(rest)-4:])
			}
			return n
		}
	}
	if n >= minOpaqueLen && isOpaque(tok) {
		b.WriteString(mask)
		b.WriteString(tok[n-4:])
		return n
	}
	return 0
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

// isOpaque reports whether tok looks machine-made: only token bytes, with
// letters and at least four digits making a tenth of it (keys, hex ids), so
// that long names such as Gemini quota ids are kept.
func isOpaque(tok string) bool {
	letters, digits := 0, 0
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			letters++
		case c == '-' || c == '_':
		default:
			return false
		}
	}
	return letters > 0 && digits >= 4 && digits*10 >= len(tok)
}

// sanitizeMessage makes a provider message safe to keep: request URLs cut to
// their host, secrets masked, long quoted strings (possibly echoed input)
// elided, control characters and runs of spaces collapsed, and the result
// cut to maxMessageLen.
func sanitizeMessage(s string) string {
	if len(s) > maxScanLen {
		s = s[:maxScanLen]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = redactURLs(s)
	s = MaskSecrets(s)
	s = elideQuoted(s)
	s = collapseSpace(s)
	return truncate(s, maxMessageLen)
}

// sanitizeToken makes a provider code or id safe to keep.
func sanitizeToken(s string) string {
	if len(s) > maxTokenLen {
		s = s[:maxTokenLen]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return truncate(collapseSpace(MaskSecrets(s)), maxTokenLen)
}

// redactURLs cuts every http(s) URL in s to its scheme and host: paths and
// queries may carry keys, ids and input.
func redactURLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for {
		i := indexURL(s)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i:]
		scheme := strings.Index(s, "://") + 3
		host := scheme
		for host < len(s) && !isURLEnd(s[host]) && s[host] != '/' && s[host] != '?' && s[host] != '#' {
			host++
		}
		if at := strings.LastIndexByte(s[scheme:host], '@'); at >= 0 {
			b.WriteString(s[:scheme]) // drop userinfo
			scheme += at + 1
			b.WriteString(s[scheme:host])
		} else {
			b.WriteString(s[:host])
		}
		end := host
		for end < len(s) && !isURLEnd(s[end]) {
			end++
		}
		s = s[end:]
	}
}

func indexURL(s string) int {
	i := strings.Index(s, "http://")
	j := strings.Index(s, "https://")
	switch {
	case i < 0:
		return j
	case j < 0:
		return i
	}
	return min(i, j)
}

func isURLEnd(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '"', '\'', '`', '<', '>', ')', ']', '}', ',':
		return true
	}
	return false
}

// elideQuoted replaces the content of quoted strings longer than
// maxQuotedLen with "…". A quote opens only after a non-letter and closes
// only before one, so apostrophes ("model's") are left alone.
func elideQuoted(s string) string {
	if !strings.ContainsAny(s, "'\"`") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if (c == '\'' || c == '"' || c == '`') && (i == 0 || !isLetterByte(s[i-1])) {
			if j := closingQuote(s, i+1, c); j > 0 {
				if inner := s[i+1 : j]; len(inner) > maxQuotedLen && !isRedactedURL(inner) {
					b.WriteByte(c)
					b.WriteString("…")
					b.WriteByte(c)
				} else {
					b.WriteString(s[i : j+1])
				}
				i = j + 1
				continue
			}
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}

// isRedactedURL reports whether s is a lone URL, already cut to its host.
func isRedactedURL(s string) bool {
	_, host, ok := strings.Cut(s, "://")
	return ok && (strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")) && !strings.ContainsAny(host, " /?#")
}

func closingQuote(s string, from int, q byte) int {
	for j := from; j < len(s); j++ {
		if s[j] == '\n' {
			return -1
		}
		if s[j] == q && (j+1 == len(s) || !isLetterByte(s[j+1])) {
			return j
		}
	}
	return -1
}

func isLetterByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= utf8.RuneSelf
}

// collapseSpace turns control characters into spaces, collapses runs of
// spaces and trims the ends.
func collapseSpace(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if r < ' ' || r == 0x7f || r == ' ' || r == 0x85 || r == 0x2028 || r == 0x2029 {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// truncate cuts s to at most n bytes at a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

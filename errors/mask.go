package errors

import (
	"strings"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/internal/secrets"
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
)

// MaskSecrets returns s with API keys and tokens masked, by the detector
// capacity.Scope.Validate uses for names: a key keeps its well-known prefix
// and its last four characters ("Incorrect API key provided:
// sk-proj-abc...wxyz" becomes "... sk-proj-****wxyz"; hf_, gsk_, xai-, AKIA,
// ghp_, xoxb- and the other families alike), bearer tokens and secret query
// parameters lose their value, and a long random token (a hex key, a session
// token) keeps only its last four. A prefix without a key body ("sk-",
// "sk-learn") is left alone. A string without a secret is returned as it
// is, and masking a masked string changes nothing.
func MaskSecrets(s string) string {
	return secrets.Mask(s)
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

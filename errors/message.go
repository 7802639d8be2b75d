package errors

import (
	"regexp"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/headers"
)

// The message rules are the last evidence: they run on the lower-cased
// provider message only where the structured fields leave a question open.

// containsAny reports whether s contains any of subs.
func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// saysRequestTooLarge: OpenAI's 429 for a request larger than the whole
// per-minute bucket ("Request too large for gpt-4o ... on tokens per min
// (TPM): Limit 30000, Requested 31538"); every structured field says
// rate_limit_exceeded.
func saysRequestTooLarge(msg string) bool {
	return strings.Contains(msg, "request too large")
}

// saysContextTooLong: the input exceeds the model's context window.
func saysContextTooLong(msg string) bool {
	return containsAny(msg,
		"prompt is too long",                   // Anthropic
		"maximum context length",               // OpenAI
		"context_length_exceeded",              // proxies quoting the code
		"context window",                       // several
		"input is too long",                    // several
		"exceeds the maximum number of tokens", // Gemini
		"input token count exceeds",            // Gemini
		"too many input tokens",                // several
		"reduce the length of the messages",    // OpenAI
	)
}

// saysBilling: a credit balance or billing quota is spent.
func saysBilling(msg string) bool {
	return containsAny(msg,
		"credit balance is too low", // Anthropic
		"insufficient_quota",
		"billing hard limit",
		"insufficient credits",
		"insufficient balance",
	)
}

// saysOverloaded: the provider is shedding load rather than failing.
func saysOverloaded(msg string) bool {
	return containsAny(msg, "overloaded", "high demand", "over capacity", "at capacity", "capacity constraints")
}

// messageDimension reads the binding budget from a rate-limit message:
// OpenAI "on tokens per min (TPM)", "(RPD)"; Anthropic "of 400,000 input
// tokens per minute"; Azure OpenAI "exceeded token rate limit", "exceeded
// call rate limit" (its deployments' per-minute TPM and RPM).
func messageDimension(msg string) (capacity.Dimension, bool) {
	switch {
	case containsAny(msg, "input tokens per minute", "input tokens per min"):
		return capacity.InputTokens, true
	case containsAny(msg, "output tokens per minute", "output tokens per min"):
		return capacity.OutputTokens, true
	case containsAny(msg, "(tpd)", "tokens per day"):
		return capacity.TokensPerDay, true
	case containsAny(msg, "(rpd)", "requests per day"):
		return capacity.RequestsPerDay, true
	case containsAny(msg, "(tpm)", "tokens per min", "token rate limit"):
		return capacity.Tokens, true
	case containsAny(msg, "(rpm)", "requests per min", "call rate limit"):
		return capacity.Requests, true
	}
	return 0, false
}

// saysPerDay reports whether a rate-limit message names a daily budget.
func saysPerDay(msg string) bool {
	return containsAny(msg, "per day", "(tpd)", "(rpd)", "daily")
}

// messageWait reads "try again in 1.209s" (OpenAI), "retry in 37.5s"
// (Gemini), "try again in 20 seconds" or "retry after 86400 seconds" (Azure
// OpenAI) from a message, in any form headers.ParseReset reads; a number
// without a unit counts only with a unit word after it. Times are read
// against ref. Zero or negative counts as absent.
func messageWait(msg string, ref time.Time) (time.Duration, bool) {
	for _, marker := range []string{"try again in ", "retry in ", "retry after "} {
		i := strings.Index(msg, marker)
		if i < 0 {
			continue
		}
		word, after, _ := strings.Cut(msg[i+len(marker):], " ")
		word = strings.TrimRight(word, ".,;:)")
		if unit, ok := unitWord(strings.TrimLeft(after, " ")); ok {
			if d, ok := headers.ParseReset(word, unit, ref); ok {
				return d, true
			}
		}
		if d, ok := headers.ParseDuration(word); ok && d > 0 {
			return d, true
		}
	}
	return 0, false
}

// unitWord is the unit a message's word names: "ms", "milliseconds",
// "s", "sec", "seconds", "min", "minutes", "h", "hours".
func unitWord(w string) (time.Duration, bool) {
	switch {
	case strings.HasPrefix(w, "ms"), strings.HasPrefix(w, "millisecond"):
		return time.Millisecond, true
	case strings.HasPrefix(w, "s"):
		return time.Second, true
	case strings.HasPrefix(w, "min"):
		return time.Minute, true
	case strings.HasPrefix(w, "h"):
		return time.Hour, true
	}
	return 0, false
}

// messageNumber reads the integer after label ("limit 30000", "requested
// 31538"), allowing thousands separators.
func messageNumber(msg, label string) (int64, bool) {
	i := strings.Index(msg, label)
	if i < 0 {
		return 0, false
	}
	rest := strings.TrimLeft(msg[i+len(label):], " :")
	var n int64
	digits := 0
	for j := 0; j < len(rest); j++ {
		c := rest[j]
		if c == ',' && j+1 < len(rest) && isDigitByte(rest[j+1]) && digits > 0 {
			continue
		}
		if !isDigitByte(c) {
			break
		}
		if n > (1<<63-1)/10-1 {
			return 0, false
		}
		n = n*10 + int64(c-'0')
		digits++
	}
	return n, digits > 0
}

func isDigitByte(c byte) bool { return c >= '0' && c <= '9' }

// regainAccessRe reads Anthropic's "regain access on 2026-11-01 at 00:00
// UTC" (the message is lower-cased).
var regainAccessRe = regexp.MustCompile(`regain access on (\d{4}-\d{2}-\d{2}) at (\d{2}:\d{2}) utc`)

// regainAccessAt returns the time a usage-limit message says access returns.
func regainAccessAt(msg string) (time.Time, bool) {
	m := regainAccessRe.FindStringSubmatch(msg)
	if m == nil {
		return time.Time{}, false
	}
	t, err := time.Parse("2006-01-02 15:04", m[1]+" "+m[2])
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

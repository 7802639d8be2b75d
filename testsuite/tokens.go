package testsuite

import (
	"strings"
	"time"
)

// MessageOverhead is the tokens the fake provider adds for each message
// (and for an Anthropic system prompt), on top of its content.
const MessageOverhead = 4

// CountTokens returns the fake provider's token count for a piece of text:
// ceil(len(text)/4), counting bytes. It is deterministic and fast, and close
// enough to real BPE tokenizers on English text for rate-limit tests.
func CountTokens(text string) int64 { return (int64(len(text)) + 3) / 4 }

// PromptTokens returns the input tokens the fake provider counts for a prompt
// whose messages (system prompt included, as its own message) each have one
// text content: the sum over messages of MessageOverhead + CountTokens(text).
//
// The general rule, for both wire formats: each message costs
// MessageOverhead plus CountTokens of each content part; a text part counts
// its text, any other part (image, tool use, tool result...) counts its raw
// JSON; each tool definition counts CountTokens of its raw JSON.
func PromptTokens(messages ...string) int64 {
	var n int64
	for _, m := range messages {
		n += MessageOverhead + CountTokens(m)
	}
	return n
}

// Call describes one request about to be answered; OutputFunc and LatencyFunc
// receive it.
type Call struct {
	// Seq numbers requests in arrival order (as Entry.Seq).
	Seq uint64
	// Provider is the wire format of the request.
	Provider Provider
	// Scope is the request's model and key.
	Scope Scope
	// InputTokens counts every prompt token.
	InputTokens int64
	// MaxTokens is the effective max_tokens (the model's default if absent).
	MaxTokens int64
	// Hash is the 64-bit FNV-1a hash of the request body: equal requests
	// have equal hashes, whatever their order of arrival.
	Hash uint64
}

// OutputFunc returns how many tokens the answer to c carries. The fake
// provider clamps the result to [1, c.MaxTokens]. It is called from many
// goroutines at once.
type OutputFunc func(c Call) int64

// LatencyFunc returns how long the fake provider takes to answer c with an
// answer of output tokens, on the provider's clock. It is called from many
// goroutines at once.
type LatencyFunc func(c Call, output int64) time.Duration

// FixedOutput returns an OutputFunc that answers every request with n tokens
// (capped at max_tokens).
func FixedOutput(n int64) OutputFunc { return func(Call) int64 { return n } }

// SeededOutput returns an OutputFunc that draws the answer's length uniformly
// from [1, MaxTokens], from a hash of seed and the request body: the same
// request with the same seed always gets the same length.
func SeededOutput(seed uint64) OutputFunc {
	return func(c Call) int64 {
		if c.MaxTokens <= 1 {
			return 1
		}
		return 1 + int64(splitmix64(seed^c.Hash)%uint64(c.MaxTokens))
	}
}

// splitmix64 is a 64-bit mixing function (Steele et al.).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fnvString adds s to the FNV-1a hash h.
func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// fnvBytes adds b to the FNV-1a hash h.
func fnvBytes(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

// answerUnit is the fake answer's word; 4 bytes, so n words minus the last
// space count as n tokens.
const answerUnit = "tok "

var answerText = strings.Repeat(answerUnit, 4096)

// answer returns a text that CountTokens counts as n tokens.
func answer(n int64) string {
	if n <= 0 {
		return ""
	}
	size := int(n)*len(answerUnit) - 1
	if size <= len(answerText) {
		return answerText[:size]
	}
	return strings.Repeat(answerUnit, int(n))[:size]
}

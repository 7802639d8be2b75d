package errors

import (
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

var (
	headerLines      = testenv.HeaderText
	parseHeaderLines = testenv.ParseHeaderText
)

// checkVerdict checks the contract every verdict keeps, whatever the input,
// and that it converts to the error an activity returns.
func checkVerdict(t *testing.T, v Verdict, now time.Time) {
	t.Helper()
	if v.Class < 0 || int(v.Class) >= numClasses {
		t.Fatalf("class %d out of range", v.Class)
	}
	if v.Retryable != v.Class.Retryable() {
		t.Fatalf("%v: retryable %v", v.Class, v.Retryable)
	}
	if v.RetryAfter < 0 || v.RetryAfter > MaxDailyReset {
		t.Fatalf("wait %v out of bounds", v.RetryAfter)
	}
	if v.Class == RateLimited && (v.RetryAfter > MaxUnknownWait ||
		v.HasDimension && v.Dimension.PerMinute() && v.RetryAfter > MaxPerMinuteWait) {
		t.Fatalf("a rate limit waiting %v on %v hides exhaustion", v.RetryAfter, v.Dimension)
	}
	if !v.ResetAt.IsZero() && (v.ResetAt.Before(now) || v.ResetAt.After(now.Add(MaxStatedReset))) {
		t.Fatalf("reset %v out of bounds as of %v", v.ResetAt, now)
	}
	if len(v.Message) > maxMessageLen || MaskSecrets(v.Message) != v.Message {
		t.Fatalf("message not sanitized: %q", v.Message)
	}
	if v.HasDimension && (v.Dimension < 0 || int(v.Dimension) >= capacity.NumDimensions) {
		t.Fatalf("dimension %d out of range", v.Dimension)
	}
	err := Converter{Jitter: halfJitter}.ActivityError(v, "s")
	appErr, ok := err.(*temporal.ApplicationError)
	if v.Class == Canceled || !ok {
		if v.Class != Canceled || ok {
			t.Fatalf("%v converted to %T", v.Class, err)
		}
		return
	}
	if appErr.NonRetryable() == v.Class.Retryable() {
		t.Fatalf("%v: NonRetryable %v", v.Class, appErr.NonRetryable())
	}
	if v.Class == RateLimited && appErr.NextRetryDelay() <= 0 {
		t.Fatalf("rate limit without NextRetryDelay")
	}
	if d := appErr.NextRetryDelay(); d != 0 && d < v.RetryAfter {
		t.Fatalf("delay %v earlier than asked %v", d, v.RetryAfter)
	}
	if d, ok := DetailsOf(err); !ok || d.Class != v.Class {
		t.Fatalf("details %+v, %v", d, ok)
	}
}

// FuzzClassifyHTTP: arbitrary status, headers and body never panic and
// always yield a valid verdict.
func FuzzClassifyHTTP(f *testing.F) {
	for _, fc := range loadErrorFixtures(f) {
		f.Add(string(fc.Provider), fc.Status, headerLines(fc.Headers), []byte(fc.Body))
	}
	f.Add("gemini", 429, "", []byte(`[{"error":{"details":[{"@type":"google.rpc.QuotaFailure","violations":[{"quotaId":"PerDay"}]}]}}]`))
	f.Add("openai", 400, "retry-after-ms: 1e400", []byte(`{"error":"sk-proj-abcdefghijklmnop1234"}`))
	f.Fuzz(func(t *testing.T, provider string, status int, header string, body []byte) {
		v := ClassifyHTTP(capacity.Provider(provider), status, parseHeaderLines(header), body, fixtureTime)
		checkVerdict(t, v, fixtureTime)
	})
}

// FuzzClassifyBody: arbitrary bodies under every status class the
// classifier distinguishes.
func FuzzClassifyBody(f *testing.F) {
	for _, fc := range loadErrorFixtures(f) {
		f.Add([]byte(fc.Body))
	}
	statuses := []int{0, 200, 400, 401, 403, 404, 408, 413, 422, 429, 500, 503, 529}
	providers := []capacity.Provider{capacity.OpenAI, capacity.Anthropic, capacity.Gemini}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, p := range providers {
			for _, s := range statuses {
				checkVerdict(t, ClassifyHTTP(p, s, nil, body, fixtureTime), fixtureTime)
			}
		}
	})
}

// FuzzClassifyHeaders: arbitrary headers on a rate-limit response.
func FuzzClassifyHeaders(f *testing.F) {
	for _, fc := range loadErrorFixtures(f) {
		f.Add(string(fc.Provider), headerLines(fc.Headers))
	}
	body := []byte(openAIBody("tokens", "rate_limit_exceeded", "Rate limit reached on tokens per min (TPM)."))
	f.Fuzz(func(t *testing.T, provider, header string) {
		checkVerdict(t, ClassifyHTTP(capacity.Provider(provider), 429, parseHeaderLines(header), body, fixtureTime), fixtureTime)
	})
}

// FuzzMaskSecrets: masking never panics, is idempotent, never grows a
// secret-free string, and never leaks the middle of a key.
func FuzzMaskSecrets(f *testing.F) {
	f.Add("Incorrect API key provided: sk-proj-abc...wxyz.", "Ab3dEf6hIj9kLm2nOp5q")
	f.Add("key=AIza", "SyA1234567890abcdef")
	f.Fuzz(func(t *testing.T, s, secret string) {
		once := MaskSecrets(s)
		if MaskSecrets(once) != once {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, once, MaskSecrets(once))
		}
		if !isAlnum(secret) || len(secret) < 12 || strings.Contains(s, secret[:len(secret)-4]) {
			return
		}
		key := "sk-proj-" + secret
		out := MaskSecrets(s + " " + key + " " + s)
		if strings.Contains(out, key[:len(key)-4]) {
			t.Fatalf("key leaked: %q", out)
		}
		msg := sanitizeMessage(s + " " + key)
		if strings.Contains(msg, secret[:len(secret)-4]) {
			t.Fatalf("key leaked in message: %q", msg)
		}
	})
}

func isAlnum(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

package errors_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
)

// A provider's answer becomes a verdict: what failed, whether to retry,
// and when.
func ExampleClassifyHTTP() {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

	// A per-minute token limit: wait as the provider says, then retry.
	h := http.Header{"Retry-After": {"2"}, "X-Ratelimit-Reset-Tokens": {"1.5s"}}
	body := []byte(`{"error":{"message":"Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000.","type":"tokens","code":"rate_limit_exceeded"}}`)
	v := tgerrors.ClassifyHTTP(capacity.OpenAI, http.StatusTooManyRequests, h, body, now)
	fmt.Println(tgerrors.TypeOf(v.Class), v.Retryable, v.Dimension, v.RetryAfter)

	// An account out of credit: no retry helps.
	body = []byte(`{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}}`)
	v = tgerrors.ClassifyHTTP(capacity.OpenAI, http.StatusTooManyRequests, http.Header{}, body, now)
	fmt.Println(tgerrors.TypeOf(v.Class), v.Retryable, v.Reason)
	// Output:
	// tollgate.RateLimited true tokens 2s
	// tollgate.QuotaExhausted false billing
}

package errors_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
)

func TestAnthropicUsageLimitIsQuotaWithReset(t *testing.T) {
	body := `{"type":"error","error":{"type":"invalid_request_error","message":"You have reached your specified API usage limits. You will regain access on 2026-11-01 at 00:00 UTC."}}`
	date := time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC)
	h := http.Header{"Date": []string{date.Format(http.TimeFormat)}}
	// A local clock 30 s fast reads the reset relative to the date header.
	now := date.Add(30 * time.Second)
	v := tgerrors.ClassifyHTTP(capacity.Anthropic, 400, h, []byte(body), now)
	assert.Equal(t, tgerrors.QuotaExhausted, v.Class)
	assert.Equal(t, tgerrors.ReasonUsageLimit, v.Reason)
	assert.False(t, v.Retryable)
	assert.Equal(t, time.Date(2026, 11, 1, 0, 0, 30, 0, time.UTC), v.ResetAt)

	v = tgerrors.ClassifyHTTP(capacity.Anthropic, 400, h, []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"You have reached your specified API usage limits."}}`), now)
	assert.Equal(t, tgerrors.QuotaExhausted, v.Class)
	assert.True(t, v.ResetAt.IsZero(), "no stated reset")
}

package errors

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// fixtureTime is the date header of every fixture.
var fixtureTime = time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC)

type errorFixture struct {
	Name     string            `json:"name"`
	Provider capacity.Provider `json:"provider"`
	Status   int               `json:"status"`
	Headers  map[string]string `json:"headers"`
	Body     string            `json:"body"`
	Expect   errorExpect       `json:"expect"`
	Source   string            `json:"source"`
	Note     string            `json:"note"`
}

// errorExpect is every key the fixtures' expect objects use; an unknown key
// fails the load, so a new expectation is never silently skipped.
type errorExpect struct {
	Class       string     `json:"class"`
	Dimension   *string    `json:"dimension"`
	QuotaID     *string    `json:"quota_id"`
	RetryAfterS *float64   `json:"retry_after_s"`
	ResetAt     *time.Time `json:"reset_at"`
	Retryable   *bool      `json:"retryable"`
	Reason      *string    `json:"reason"`
	Limit       *int64     `json:"limit"`
	Requested   *int64     `json:"requested"`
	Note        string     `json:"note"`
}

func loadErrorFixtures(tb testing.TB) []errorFixture {
	tb.Helper()
	var cases []errorFixture
	testenv.LoadFixtures(tb, "provider-errors.json", &cases, true)
	require.NotEmpty(tb, cases)
	return cases
}

func fixtureHeader(m map[string]string) http.Header { return testenv.Header(m) }

// checkExpect checks v against every field e states; v may say more.
func checkExpect(t *testing.T, e errorExpect, v Verdict) {
	t.Helper()
	require.Equal(t, e.Class, v.Class.String(), "class; verdict %s", v)
	if e.Dimension != nil {
		require.True(t, v.HasDimension, "no dimension; verdict %s", v)
		require.Equal(t, *e.Dimension, v.Dimension.String())
	}
	if e.QuotaID != nil {
		require.Equal(t, *e.QuotaID, v.QuotaID)
	}
	if e.RetryAfterS != nil {
		require.Equal(t, time.Duration(math.Round(*e.RetryAfterS*float64(time.Second))), v.RetryAfter)
	}
	if e.ResetAt != nil {
		require.Equal(t, e.ResetAt.UTC(), v.ResetAt.UTC())
	}
	if e.Retryable != nil {
		require.Equal(t, *e.Retryable, v.Retryable)
	}
	if e.Reason != nil {
		require.Equal(t, *e.Reason, string(v.Reason))
	}
	if e.Limit != nil {
		require.Equal(t, *e.Limit, v.Limit)
	}
	if e.Requested != nil {
		require.Equal(t, *e.Requested, v.Requested)
	}
}

func TestClassifyFixtures(t *testing.T) {
	// Through the SDKs: errors/openaierr, errors/anthropicerr, errors/geminierr.
	for _, fc := range loadErrorFixtures(t) {
		t.Run(fc.Name, func(t *testing.T) {
			checkExpect(t, fc.Expect, ClassifyHTTP(fc.Provider, fc.Status, fixtureHeader(fc.Headers), []byte(fc.Body), fixtureTime))
		})
	}
}

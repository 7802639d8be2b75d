package testenv

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

// ErrorFixtureTime is the date header of every provider error fixture.
var ErrorFixtureTime = time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC)

// ErrorFixture is one recorded provider failure of provider-errors.json and
// what a correct classifier concludes from it.
type ErrorFixture struct {
	Name     string            `json:"name"`
	Provider capacity.Provider `json:"provider"`
	Status   int               `json:"status"`
	Headers  map[string]string `json:"headers"`
	Body     string            `json:"body"`
	Expect   ErrorExpect       `json:"expect"`
	Source   string            `json:"source"`
	Note     string            `json:"note"`
}

// ErrorExpect is every key the fixtures' expect objects use; an unknown key
// fails the load, so a new expectation is never silently skipped.
type ErrorExpect struct {
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

// LoadErrorFixtures returns the fixtures of the file name (a path under
// the package's testdata, as LoadFixtures reads it), strictly decoded.
func LoadErrorFixtures(tb testing.TB, name string) []ErrorFixture {
	tb.Helper()
	var cases []ErrorFixture
	LoadFixtures(tb, name, &cases, true)
	require.NotEmpty(tb, cases)
	return cases
}

// VerdictFacts is what a verdict concludes, in the fixtures' terms (the
// errors package's Verdict, without importing it).
type VerdictFacts struct {
	Verdict      string // for messages
	Class        string
	Dimension    string
	HasDimension bool
	QuotaID      string
	RetryAfter   time.Duration
	ResetAt      time.Time
	Retryable    bool
	Reason       string
	Limit        int64
	Requested    int64
}

// CheckExpect checks got against every field e states; got may say more.
func CheckExpect(t *testing.T, e ErrorExpect, got VerdictFacts) {
	t.Helper()
	require.Equal(t, e.Class, got.Class, "class; verdict %s", got.Verdict)
	if e.Dimension != nil {
		require.True(t, got.HasDimension, "no dimension; verdict %s", got.Verdict)
		require.Equal(t, *e.Dimension, got.Dimension)
	}
	if e.QuotaID != nil {
		require.Equal(t, *e.QuotaID, got.QuotaID)
	}
	if e.RetryAfterS != nil {
		require.Equal(t, time.Duration(math.Round(*e.RetryAfterS*float64(time.Second))), got.RetryAfter)
	}
	if e.ResetAt != nil {
		require.Equal(t, e.ResetAt.UTC(), got.ResetAt.UTC())
	}
	if e.Retryable != nil {
		require.Equal(t, *e.Retryable, got.Retryable)
	}
	if e.Reason != nil {
		require.Equal(t, *e.Reason, got.Reason)
	}
	if e.Limit != nil {
		require.Equal(t, *e.Limit, got.Limit)
	}
	if e.Requested != nil {
		require.Equal(t, *e.Requested, got.Requested)
	}
}

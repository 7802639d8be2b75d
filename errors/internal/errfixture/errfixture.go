// Package errfixture runs the provider error fixtures
// (errors/testdata/provider-errors.json) through an SDK reader: the tests of
// errors/openaierr, errors/anthropicerr and errors/geminierr share it. The
// errors package's own tests read the same file from plain HTTP.
package errfixture

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// Time is the date header of every fixture.
var Time = time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC)

// Fixture is one recorded provider failure and the verdict it must get.
type Fixture struct {
	Name     string            `json:"name"`
	Provider capacity.Provider `json:"provider"`
	Status   int               `json:"status"`
	Headers  map[string]string `json:"headers"`
	Body     string            `json:"body"`
	Expect   Expect            `json:"expect"`
	Source   string            `json:"source"`
	Note     string            `json:"note"`
}

// Expect is every key the fixtures' expect objects use; an unknown key
// fails the load, so a new expectation is never silently skipped.
type Expect struct {
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

// Load returns the fixtures of provider p, from $TOLLGATE_FIXTURES if set,
// else from errors/testdata (the caller is a package directly under errors).
func Load(tb testing.TB, p capacity.Provider) []Fixture {
	tb.Helper()
	name := "provider-errors.json"
	if os.Getenv("TOLLGATE_FIXTURES") == "" {
		// testenv reads testdata/<name>: from errors/<reader>, that is
		// errors/testdata once cleaned.
		name = filepath.Join("..", "..", "testdata", name)
	}
	var all, cases []Fixture
	testenv.LoadFixtures(tb, name, &all, true)
	for _, fc := range all {
		if fc.Provider == p {
			cases = append(cases, fc)
		}
	}
	require.NotEmpty(tb, cases, "no %s fixtures", p)
	return cases
}

// Check checks v against every field e states; v may say more.
func Check(t *testing.T, e Expect, v tgerrors.Verdict) {
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

// Serve returns a server answering every request with fc's response.
func Serve(t *testing.T, fc Fixture) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range fc.Headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(fc.Status)
		_, _ = io.WriteString(w, fc.Body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Comparable is v without what only one path can see (genai keeps no
// headers).
func Comparable(v tgerrors.Verdict) tgerrors.Verdict {
	v.Observation = capacity.Observation{}
	return v
}

// Run checks every fixture of provider p through the SDK: sdkError makes one
// call, retries off, against a server answering with the fixture's response
// (its base URL given) and returns the SDK's error. The verdict must meet the
// fixture's expectations and equal the plain-HTTP verdict, with or without
// the provider named.
func Run(t *testing.T, p capacity.Provider, sdkError func(t *testing.T, baseURL string) error) {
	for _, fc := range Load(t, p) {
		t.Run(fc.Name, func(t *testing.T) {
			fromHTTP := tgerrors.ClassifyHTTP(fc.Provider, fc.Status, testenv.Header(fc.Headers), []byte(fc.Body), Time)
			err := sdkError(t, Serve(t, fc).URL)
			fromSDK := tgerrors.Classify(fc.Provider, err, Time)
			Check(t, fc.Expect, fromSDK)
			require.Equal(t, Comparable(fromHTTP), Comparable(fromSDK))
			require.Equal(t, Comparable(fromSDK), Comparable(tgerrors.Classify("", err, Time)))
		})
	}
}

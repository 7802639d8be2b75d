// Package errfixture runs the provider error fixtures
// (errors/testdata/provider-errors.json) through an SDK reader: the tests of
// errors/openaierr, errors/anthropicerr and errors/geminierr share it. The
// errors package's own tests read the same file from plain HTTP.
package errfixture

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/internal/fixtures"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// Time is the date header of every fixture.
var Time = fixtures.Time

// Fixture is one recorded provider failure and the verdict it must get.
type Fixture = fixtures.Error

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
	var cases []Fixture
	for _, fc := range fixtures.LoadErrors(tb, name) {
		if fc.Provider == p {
			cases = append(cases, fc)
		}
	}
	require.NotEmpty(tb, cases, "no %s fixtures", p)
	return cases
}

// Check checks v against every field e states; v may say more.
func Check(t *testing.T, e fixtures.Expect, v tgerrors.Verdict) {
	t.Helper()
	fixtures.CheckExpect(t, e, fixtures.VerdictFacts{
		Verdict: v.String(), Class: v.Class.String(), Dimension: v.Dimension.String(), HasDimension: v.HasDimension,
		QuotaID: v.QuotaID, RetryAfter: v.RetryAfter, ResetAt: v.ResetAt, Retryable: v.Retryable,
		Reason: string(v.Reason), Limit: v.Limit, Requested: v.Requested,
	})
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

package errors

import (
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/fixtures"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// fixtureTime is the date header of every fixture.
var fixtureTime = fixtures.Time

func loadErrorFixtures(tb testing.TB) []fixtures.Error {
	return fixtures.LoadErrors(tb, "provider-errors.json")
}

func fixtureHeader(m map[string]string) http.Header { return testenv.Header(m) }

// checkExpect checks v against every field e states; v may say more.
func checkExpect(t *testing.T, e fixtures.Expect, v Verdict) {
	t.Helper()
	fixtures.CheckExpect(t, e, fixtures.VerdictFacts{
		Verdict: v.String(), Class: v.Class.String(), Dimension: v.Dimension.String(), HasDimension: v.HasDimension,
		QuotaID: v.QuotaID, RetryAfter: v.RetryAfter, ResetAt: v.ResetAt, Retryable: v.Retryable,
		Reason: string(v.Reason), Limit: v.Limit, Requested: v.Requested,
	})
}

func TestClassifyFixtures(t *testing.T) {
	// Through the SDKs: errors/openaierr, errors/anthropicerr, errors/geminierr.
	for _, fc := range loadErrorFixtures(t) {
		t.Run(fc.Name, func(t *testing.T) {
			checkExpect(t, fc.Expect, ClassifyHTTP(fc.Provider, fc.Status, fixtureHeader(fc.Headers), []byte(fc.Body), fixtureTime))
		})
	}
}

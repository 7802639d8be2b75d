package errors

import (
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// fixtureTime is the date header of every fixture.
var fixtureTime = testenv.ErrorFixtureTime

func loadErrorFixtures(tb testing.TB) []testenv.ErrorFixture {
	return testenv.LoadErrorFixtures(tb, "provider-errors.json")
}

func fixtureHeader(m map[string]string) http.Header { return testenv.Header(m) }

// checkExpect checks v against every field e states; v may say more.
func checkExpect(t *testing.T, e testenv.ErrorExpect, v Verdict) {
	t.Helper()
	testenv.CheckExpect(t, e, testenv.VerdictFacts{
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

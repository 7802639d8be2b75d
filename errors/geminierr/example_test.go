package geminierr_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"google.golang.org/genai"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	_ "github.com/tollgate-dev/tollgate/errors/geminierr" // classify genai.APIError
)

// An error the Gemini SDK returns is classified as it is: here a per-day
// request quota, spent until Gemini's day ends.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[`+
			`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}}`)
	}))
	defer srv.Close()
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: "AIza-example", Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL},
	})
	if err != nil {
		panic(err)
	}
	_, err = client.Models.GenerateContent(context.Background(), "gemini-2.5-flash", genai.Text("hello"), nil)

	v := tgerrors.Classify(capacity.Gemini, err, time.Now())
	fmt.Println(tgerrors.TypeOf(v.Class), v.Reason, v.Retryable)
	// Output:
	// tollgate.QuotaExhausted daily_quota false
}

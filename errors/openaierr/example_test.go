package openaierr_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	_ "github.com/tollgate-dev/tollgate/errors/openaierr" // classify *openai.Error
)

// An error the OpenAI SDK returns is classified as it is, headers and body
// included.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "20")
		w.Header().Set("X-Ratelimit-Reset-Requests", "20s")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":{"message":"Rate limit reached for gpt-4o-mini on requests per min (RPM): Limit 500, Used 500, Requested 1.","type":"requests","code":"rate_limit_exceeded"}}`)
	}))
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("sk-example"), option.WithMaxRetries(0))
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	})

	v := tgerrors.Classify(capacity.OpenAI, err, time.Now())
	fmt.Println(tgerrors.TypeOf(v.Class), v.Dimension, v.RetryAfter)
	// Output:
	// tollgate.RateLimited requests 20s
}

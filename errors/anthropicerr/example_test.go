package anthropicerr_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	_ "github.com/tollgate-dev/tollgate/errors/anthropicerr" // classify *anthropic.Error
)

// An error the Anthropic SDK returns is classified as it is: here an
// output-token limit, with the wait its headers state.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Anthropic-Ratelimit-Output-Tokens-Remaining", "0")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 8,000 output tokens per minute."}}`)
	}))
	defer srv.Close()
	client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("sk-ant-example"), option.WithMaxRetries(0))
	_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 16,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
	})

	v := tgerrors.Classify(capacity.Anthropic, err, time.Now())
	fmt.Println(tgerrors.TypeOf(v.Class), v.Dimension, v.RetryAfter)
	// Output:
	// tollgate.RateLimited output_tokens 7s
}

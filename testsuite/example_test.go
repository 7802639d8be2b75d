package testsuite_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate-dev/tollgate/testsuite"
)

// Example points the official OpenAI SDK at a fake provider that allows two
// requests per minute, and checks what the provider recorded.
func Example() {
	fp, err := testsuite.New(testsuite.Options{
		Models: []testsuite.Model{{Name: "gpt-4o-mini", Provider: testsuite.OpenAI,
			Limits: testsuite.Limits{RequestsPerMinute: 2, TokensPerMinute: 30_000}}},
		Output: testsuite.FixedOutput(12),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer fp.Close()

	client := openai.NewClient(option.WithBaseURL(fp.OpenAIBaseURL()),
		option.WithAPIKey(testsuite.DefaultKey), option.WithMaxRetries(0))
	prompt := "Summarize: the quick brown fox jumps over the lazy dog."
	for i := range 3 {
		var resp *http.Response
		out, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:               "gpt-4o-mini",
			Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
			MaxCompletionTokens: openai.Int(100),
		}, option.WithResponseInto(&resp))
		var apiErr *openai.Error
		switch {
		case errors.As(err, &apiErr):
			fmt.Printf("call %d: %d %s\n", i, apiErr.StatusCode, apiErr.Code)
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Printf("call %d: %d prompt + %d completion tokens, %s requests left\n", i,
				out.Usage.PromptTokens, out.Usage.CompletionTokens, resp.Header.Get("x-ratelimit-remaining-requests"))
		}
	}

	report := fp.Report(testsuite.Scope{Key: testsuite.DefaultKey, Model: "gpt-4o-mini"})
	fmt.Println("expected prompt tokens:", testsuite.PromptTokens(prompt))
	fmt.Println("429s by cause:", report.RateLimited)
	// Output:
	// call 0: 18 prompt + 12 completion tokens, 1 requests left
	// call 1: 18 prompt + 12 completion tokens, 0 requests left
	// call 2: 429 rate_limit_exceeded
	// expected prompt tokens: 18
	// 429s by cause: map[requests:1]
}

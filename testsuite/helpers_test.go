package testsuite_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/testsuite"
)

const (
	gpt    = "gpt-4o"
	claude = "claude-sonnet-4-5"
)

// t0 is the fixtures' response time.
var t0 = time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC)

// start runs a FakeProvider on a manual clock at t0 serving gpt (OpenAI) and
// claude (Anthropic) with the given limits, answering fixed-length outputs.
func start(t *testing.T, oai, ant testsuite.Limits, mutate ...func(*testsuite.Options)) (*testsuite.FakeProvider, *capacitytest.ManualClock) {
	t.Helper()
	clock := capacitytest.NewManualClock(t0)
	opts := testsuite.Options{
		Models: []testsuite.Model{
			{Name: gpt, Provider: testsuite.OpenAI, Limits: oai},
			{Name: claude, Provider: testsuite.Anthropic, Limits: ant},
		},
		Clock:  clock,
		Output: testsuite.FixedOutput(7),
	}
	for _, m := range mutate {
		m(&opts)
	}
	fp, err := testsuite.New(opts)
	require.NoError(t, err)
	t.Cleanup(fp.Close)
	return fp, clock
}

func openaiClient(fp *testsuite.FakeProvider) openai.Client {
	return openai.NewClient(option.WithBaseURL(fp.OpenAIBaseURL()),
		option.WithAPIKey(testsuite.DefaultKey), option.WithMaxRetries(0))
}

func anthropicClient(fp *testsuite.FakeProvider) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(fp.AnthropicBaseURL()),
		aoption.WithAPIKey(testsuite.DefaultKey), aoption.WithMaxRetries(0))
}

// chat sends one chat completion of prompt with max_tokens maxTokens.
func chat(t *testing.T, c openai.Client, prompt string, maxTokens int64) (*openai.ChatCompletion, *http.Response, error) {
	t.Helper()
	var resp *http.Response
	params := openai.ChatCompletionNewParams{
		Model:    gpt,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
	}
	if maxTokens > 0 {
		params.MaxCompletionTokens = openai.Int(maxTokens)
	}
	out, err := c.Chat.Completions.New(t.Context(), params, option.WithResponseInto(&resp))
	return out, resp, err
}

// message sends one Anthropic message of prompt with max_tokens maxTokens.
func message(t *testing.T, c anthropic.Client, prompt string, maxTokens int64) (*anthropic.Message, *http.Response, error) {
	t.Helper()
	var resp *http.Response
	out, err := c.Messages.New(t.Context(), anthropic.MessageNewParams{
		Model:     claude,
		MaxTokens: maxTokens,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
	}, aoption.WithResponseInto(&resp))
	return out, resp, err
}

// openaiErr asserts err is an OpenAI API error and returns it.
func openaiErr(t *testing.T, err error) *openai.Error {
	t.Helper()
	require.Error(t, err)
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	return apiErr
}

// anthropicErr asserts err is an Anthropic API error and returns it.
func anthropicErr(t *testing.T, err error) *anthropic.Error {
	t.Helper()
	require.Error(t, err)
	var apiErr *anthropic.Error
	require.ErrorAs(t, err, &apiErr)
	return apiErr
}

// post sends a raw request and returns the response and its body.
func post(t *testing.T, url, header, key, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(header, key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(bytes.TrimSpace(b))
}

// scopeOf returns the default key's scope for model.
func scopeOf(model string) testsuite.Scope {
	return testsuite.Scope{Key: testsuite.DefaultKey, Model: model}
}

// text returns a prompt of n bytes.
func text(n int) string { return strings.Repeat("a", n) }

func chatParams(model string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:     model,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		MaxTokens: openai.Int(5),
	}
}

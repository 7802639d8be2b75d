package errors

import (
	"context"
	stderrors "errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// fixtureTime is the date header of every fixture.
var fixtureTime = time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC)

type errorFixture struct {
	Name     string            `json:"name"`
	Provider capacity.Provider `json:"provider"`
	Status   int               `json:"status"`
	Headers  map[string]string `json:"headers"`
	Body     string            `json:"body"`
	Expect   errorExpect       `json:"expect"`
	Source   string            `json:"source"`
	Note     string            `json:"note"`
}

// errorExpect is every key the fixtures' expect objects use; an unknown key
// fails the load, so a new expectation is never silently skipped.
type errorExpect struct {
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

func loadErrorFixtures(tb testing.TB) []errorFixture {
	tb.Helper()
	var cases []errorFixture
	testenv.LoadFixtures(tb, "provider-errors.json", &cases, true)
	require.NotEmpty(tb, cases)
	return cases
}

func fixtureHeader(m map[string]string) http.Header { return testenv.Header(m) }

// checkExpect checks v against every field e states; v may say more.
func checkExpect(t *testing.T, e errorExpect, v Verdict) {
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

// serve returns a server answering every request with the fixture's
// response.
func serve(t *testing.T, fc errorFixture) *httptest.Server {
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

// sdkError makes one call with the provider's official SDK, retries off,
// against a server returning the fixture's response, and returns the SDK's
// error.
func sdkError(t *testing.T, fc errorFixture) error {
	t.Helper()
	srv := serve(t, fc)
	ctx := t.Context()
	switch fc.Provider {
	case capacity.OpenAI:
		client := openai.NewClient(openaioption.WithBaseURL(srv.URL), openaioption.WithAPIKey("sk-test"),
			openaioption.WithMaxRetries(0))
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "gpt-4o-mini",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		})
		_, ok := stderrors.AsType[*openai.Error](err)
		require.True(t, ok, "want *openai.Error, got %T %v", err, err)
		return err
	case capacity.Anthropic:
		client := anthropic.NewClient(anthropicoption.WithBaseURL(srv.URL), anthropicoption.WithAPIKey("sk-ant-test"),
			anthropicoption.WithMaxRetries(0))
		_, err := client.Messages.New(ctx, anthropic.MessageNewParams{
			Model:     "claude-sonnet-4-5",
			MaxTokens: 16,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
		})
		_, ok := stderrors.AsType[*anthropic.Error](err)
		require.True(t, ok, "want *anthropic.Error, got %T %v", err, err)
		return err
	case capacity.Gemini:
		client, err := genai.NewClient(ctx, &genai.ClientConfig{
			APIKey:      "AIza-test",
			Backend:     genai.BackendGeminiAPI,
			HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL},
		})
		require.NoError(t, err)
		_, err = client.Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("hello"), nil)
		_, ok := stderrors.AsType[genai.APIError](err)
		require.True(t, ok, "want genai.APIError, got %T %v", err, err)
		return err
	}
	t.Fatalf("no SDK for provider %q", fc.Provider)
	return nil
}

// comparable is a Verdict without what only one path can see (genai keeps no
// headers).
func comparableVerdict(v Verdict) Verdict {
	v.Observation = capacity.Observation{}
	return v
}

func TestClassifyFixtures(t *testing.T) {
	for _, fc := range loadErrorFixtures(t) {
		t.Run(fc.Name, func(t *testing.T) {
			fromHTTP := ClassifyHTTP(fc.Provider, fc.Status, fixtureHeader(fc.Headers), []byte(fc.Body), fixtureTime)
			t.Run("http", func(t *testing.T) { checkExpect(t, fc.Expect, fromHTTP) })

			fromSDK := Classify(fc.Provider, sdkError(t, fc), fixtureTime)
			t.Run("sdk", func(t *testing.T) {
				checkExpect(t, fc.Expect, fromSDK)
				require.Equal(t, comparableVerdict(fromHTTP), comparableVerdict(fromSDK))
			})
			t.Run("sdk without provider", func(t *testing.T) {
				require.Equal(t, comparableVerdict(fromSDK), comparableVerdict(Classify("", sdkError(t, fc), fixtureTime)))
			})
		})
	}
}

func TestClassifyWrappedSDKError(t *testing.T) {
	fc := loadErrorFixtures(t)[0]
	err := fmtErrorf(sdkError(t, fc))
	v := ClassifyContext(context.Background(), fc.Provider, err, fixtureTime)
	checkExpect(t, fc.Expect, v)
}

func fmtErrorf(err error) error { return &wrapped{err} }

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "call model: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

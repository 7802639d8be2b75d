package openaierr_test

import (
	"fmt"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/errors/internal/errfixture"
	"github.com/tollgate-dev/tollgate/errors/openaierr"
)

// sdkError makes one chat completion against baseURL, retries off, and
// returns the SDK's error.
func sdkError(t *testing.T, baseURL string) error {
	t.Helper()
	client := openai.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
	_, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	})
	_, ok := openaierr.Read(err)
	require.True(t, ok, "want *openai.Error, got %T %v", err, err)
	return err
}

func TestFixtures(t *testing.T) {
	errfixture.Run(t, capacity.OpenAI, sdkError)
}

func TestWrapped(t *testing.T) {
	fc := errfixture.Load(t, capacity.OpenAI)[0]
	err := fmt.Errorf("call model: %w", sdkError(t, errfixture.Serve(t, fc).URL))
	errfixture.Check(t, fc.Expect, tgerrors.ClassifyContext(t.Context(), fc.Provider, err, errfixture.Time))
}

func TestReadOther(t *testing.T) {
	_, ok := openaierr.Read(fmt.Errorf("not an SDK error"))
	require.False(t, ok)
	_, ok = openaierr.Read(nil)
	require.False(t, ok)
}

package anthropicerr_test

import (
	"fmt"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/errors/anthropicerr"
	"github.com/tollgate-dev/tollgate/errors/internal/errfixture"
)

// sdkError makes one messages call against baseURL, retries off, and
// returns the SDK's error.
func sdkError(t *testing.T, baseURL string) error {
	t.Helper()
	client := anthropic.NewClient(option.WithBaseURL(baseURL), option.WithAPIKey("sk-ant-test"), option.WithMaxRetries(0))
	_, err := client.Messages.New(t.Context(), anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 16,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
	})
	_, ok := anthropicerr.Read(err)
	require.True(t, ok, "want *anthropic.Error, got %T %v", err, err)
	return err
}

func TestFixtures(t *testing.T) {
	errfixture.Run(t, capacity.Anthropic, sdkError)
}

func TestWrapped(t *testing.T) {
	fc := errfixture.Load(t, capacity.Anthropic)[0]
	err := fmt.Errorf("call model: %w", sdkError(t, errfixture.Serve(t, fc).URL))
	errfixture.Check(t, fc.Expect, tgerrors.ClassifyContext(t.Context(), fc.Provider, err, errfixture.Time))
}

func TestReadOther(t *testing.T) {
	_, ok := anthropicerr.Read(fmt.Errorf("not an SDK error"))
	require.False(t, ok)
	_, ok = anthropicerr.Read(nil)
	require.False(t, ok)
}

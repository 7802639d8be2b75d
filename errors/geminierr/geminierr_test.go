package geminierr_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/errors/geminierr"
	"github.com/tollgate-dev/tollgate/errors/internal/errfixture"
)

// sdkError makes one GenerateContent call against baseURL and returns the
// SDK's error.
func sdkError(t *testing.T, baseURL string) error {
	t.Helper()
	client, err := genai.NewClient(t.Context(), &genai.ClientConfig{
		APIKey:      "AIza-test",
		Backend:     genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: baseURL},
	})
	require.NoError(t, err)
	_, err = client.Models.GenerateContent(t.Context(), "gemini-2.5-flash", genai.Text("hello"), nil)
	_, ok := geminierr.Read(err)
	require.True(t, ok, "want genai.APIError, got %T %v", err, err)
	return err
}

func TestFixtures(t *testing.T) {
	errfixture.Run(t, capacity.Gemini, sdkError)
}

func TestWrapped(t *testing.T) {
	fc := errfixture.Load(t, capacity.Gemini)[0]
	err := fmt.Errorf("call model: %w", sdkError(t, errfixture.Serve(t, fc).URL))
	errfixture.Check(t, fc.Expect, tgerrors.ClassifyContext(t.Context(), fc.Provider, err, errfixture.Time))
}

func TestReadPointerAndPlainText(t *testing.T) {
	e := &genai.APIError{Code: 429, Status: "RESOURCE_EXHAUSTED", Message: "Resource has been exhausted"}
	r, ok := geminierr.Read(fmt.Errorf("call: %w", e))
	require.True(t, ok)
	require.Equal(t, 429, r.Status)
	require.Equal(t, tgerrors.RateLimited, tgerrors.Classify("", e, errfixture.Time).Class)

	// A body genai could not parse: Status is the HTTP status line.
	plain := genai.APIError{Code: http.StatusBadGateway, Status: "502 Bad Gateway", Message: "upstream connect error"}
	v := tgerrors.Classify("", plain, errfixture.Time)
	require.Equal(t, tgerrors.Transient, v.Class)
	require.Equal(t, capacity.Gemini, v.Provider)
	require.Empty(t, v.Code)
	require.Equal(t, "upstream connect error", v.Message)

	_, ok = geminierr.Read(fmt.Errorf("not an SDK error"))
	require.False(t, ok)
}

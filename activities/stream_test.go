package activities_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/activities"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
)

// TestStreamCutMidwayIsAnAnswerLost: a stream the connection cuts after
// two deltas fails the attempt as a transient failure with no status, which
// the gate settles as an unknown outcome (the whole reservation kept); the
// sink got what arrived.
func TestStreamCutMidwayIsAnAnswerLost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i := range 2 {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok%d \"},\"finish_reason\":null}]}\n\n", i)
		}
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	defer srv.Close()
	var got []string
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{Credentials: activities.StaticCredentials{"a": "k"}, BaseURL: srv.URL,
		Sink: func(_ context.Context, d string) error { got = append(got, d); return nil }})
	require.NoError(t, err)
	_, err = oa.ChatCompletionStream(context.Background(), activities.OpenAIChatCompletionRequest{Credential: "a", Params: openai.ChatCompletionNewParams{
		Model: "gpt-4o", MaxCompletionTokens: openai.Int(50), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}})
	require.Error(t, err)
	assert.Equal(t, []string{"tok0 ", "tok1 "}, got, "the sink got what arrived")
	class, ok := tgerrors.ClassOf(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, tgerrors.Transient, class, "retried: %v", err)
	d, _ := tgerrors.DetailsOf(err)
	assert.Zero(t, d.Status, "no status: the gate keeps the whole reservation (outcome unknown)")
}

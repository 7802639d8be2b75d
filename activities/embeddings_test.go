package activities_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/accounting"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/testsuite"
)

func TestEmbedTollgateCallChargesInputOnly(t *testing.T) {
	texts := []string{"the quick brown fox", "jumps over the lazy dog"}
	o := activities.OpenAIEmbedRequest{Model: testsuite.DefaultOpenAIEmbeddingModel, Credential: "team-a", Input: texts, Class: capacity.Bulk}
	c := o.TollgateCall()
	assert.Equal(t, capacity.OpenAI, c.Provider)
	assert.Equal(t, capacity.Bulk, c.Class)
	assert.Equal(t, activities.EstimateOpenAIEmbeddingTokens(o.Model, texts), c.Demand.InputTokens)
	assert.Equal(t, int64(10), c.Demand.InputTokens, "cl100k_base: 4 + 6 tokens, no per-message overhead")
	assert.Zero(t, c.Demand.OutputTokens)
	assert.Zero(t, c.Demand.MaxTokens)
	charges := accounting.OpenAIProfile{}.Charges(c.Demand)
	assert.Equal(t, int64(10), charges[capacity.Tokens], "TPM is charged the input only")

	g := activities.GeminiEmbedRequest{Model: testsuite.DefaultGeminiEmbeddingModel, Credential: "team-a", Input: texts}
	c = g.TollgateCall()
	assert.Equal(t, capacity.Gemini, c.Provider)
	assert.Equal(t, activities.EstimateGeminiEmbeddingTokens(texts), c.Demand.InputTokens)
	assert.True(t, c.Demand.InputEstimated)
	g.InputTokens = 12
	assert.Equal(t, int64(12), g.TollgateCall().Demand.InputTokens, "a caller's count wins")
}

func TestEmbedInvalidRequestsAreBadRequests(t *testing.T) {
	creds := activities.StaticCredentials{"a": "k"}
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{Credentials: creds})
	require.NoError(t, err)
	gm, err := activities.NewGemini(activities.GeminiOptions{Credentials: creds})
	require.NoError(t, err)
	for _, req := range []activities.EmbedRequest{
		{},
		{Model: "m", Credential: "a"},      // no input
		{Model: "m", Input: []string{"x"}}, // no credential
		{Model: "m", Credential: "a", Input: []string{"x", ""}},                               // an empty input
		{Model: "m", Credential: "a", Input: []string{"x"}, Dimensions: -1},                   // negative dimensions
		{Model: "m", Credential: "a", Input: make([]string, activities.MaxEmbeddingInputs+1)}, // too many
	} {
		_, err := oa.Embeddings(context.Background(), activities.OpenAIEmbedRequest(req))
		assert.True(t, tgerrors.IsBadRequest(err), "openai %+v: %v", req, err)
		_, err = gm.EmbedContent(context.Background(), activities.GeminiEmbedRequest(req))
		assert.True(t, tgerrors.IsBadRequest(err), "gemini %+v: %v", req, err)
	}
}

// TestEmbedAgainstTheFakeProvider runs the embeddings activities ungated
// against the fake provider over HTTP with the real SDKs: one vector per
// input, the dimensions asked for, OpenAI's usage as the provider counted
// it, and the fake refusing a chat model at the embeddings endpoint.
func TestEmbedAgainstTheFakeProvider(t *testing.T) {
	fp, err := testsuite.New(testsuite.Options{Models: []testsuite.Model{
		{Name: testsuite.DefaultOpenAIEmbeddingModel, Provider: testsuite.OpenAI, Embeddings: true},
		{Name: testsuite.DefaultGeminiEmbeddingModel, Provider: testsuite.Gemini, Embeddings: true},
		{Name: testsuite.DefaultOpenAIModel, Provider: testsuite.OpenAI},
	}})
	require.NoError(t, err)
	defer fp.Close()
	creds := activities.StaticCredentials{"default": testsuite.DefaultKey}
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{Credentials: creds, BaseURL: fp.OpenAIBaseURL(), RequestTimeout: 10 * time.Second})
	require.NoError(t, err)
	gm, err := activities.NewGemini(activities.GeminiOptions{Credentials: creds, BaseURL: fp.GeminiBaseURL(), RequestTimeout: 10 * time.Second})
	require.NoError(t, err)
	ctx := context.Background()
	texts := []string{"first document", "the second, somewhat longer, document", strings.Repeat("word ", 50)}

	res, err := oa.Embeddings(ctx, activities.OpenAIEmbedRequest{Model: testsuite.DefaultOpenAIEmbeddingModel, Credential: "default", Input: texts, Dimensions: 64})
	require.NoError(t, err)
	require.Len(t, res.Vectors, len(texts))
	for _, v := range res.Vectors {
		assert.Len(t, v, 64)
	}
	var want int64
	for _, s := range texts {
		want += testsuite.CountTokens(s)
	}
	assert.True(t, res.HasUsage)
	assert.Equal(t, capacity.Usage{InputTokens: want}, res.Usage, "input only, as the provider counted it")
	assert.NotEmpty(t, res.Header.Get("X-Ratelimit-Limit-Requests")+res.Header.Get("Date"))
	entries := fp.Entries()
	require.Len(t, entries, 1)
	assert.Equal(t, want, entries[0].Usage.InputTokens)
	assert.Zero(t, entries[0].Usage.OutputTokens)

	g, err := gm.EmbedContent(ctx, activities.GeminiEmbedRequest{Model: testsuite.DefaultGeminiEmbeddingModel, Credential: "default", Input: texts, Dimensions: 32})
	require.NoError(t, err)
	require.Len(t, g.Vectors, len(texts))
	assert.Len(t, g.Vectors[2], 32)
	assert.False(t, g.HasUsage, "Gemini reports no usage for embeddings")

	_, err = oa.Embeddings(ctx, activities.OpenAIEmbedRequest{Model: testsuite.DefaultOpenAIModel, Credential: "default", Input: texts})
	assert.True(t, tgerrors.IsBadRequest(err), "a chat model does not embed: %v", err)
	_, err = oa.Chat(ctx, activities.OpenAIChatRequest{Model: testsuite.DefaultOpenAIEmbeddingModel, Credential: "default", MaxTokens: 5,
		Messages: []activities.Message{{Content: "hi"}}})
	assert.True(t, tgerrors.IsBadRequest(err), "an embedding model does not chat: %v", err)
}

package testsuite_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tollgate-dev/tollgate/testsuite"
)

// fuzzPaths are the endpoints FuzzRequestBodies sends to.
var fuzzPaths = []string{
	"/v1/chat/completions",
	"/v1/messages",
	"/v1/embeddings",
	"/v1/responses",
	"/v1beta/models/" + testsuite.DefaultGeminiEmbeddingModel + ":embedContent",
	"/v1beta/models/" + testsuite.DefaultGeminiEmbeddingModel + ":batchEmbedContents",
}

// FuzzRequestBodies sends arbitrary bodies to every endpoint: the fake
// provider never panics and always answers with a status a real provider
// could send.
func FuzzRequestBodies(f *testing.F) {
	for _, seed := range []string{
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":5}`,
		`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"claude-sonnet-4-5","max_tokens":5,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":-1}`,
		`{"model":"text-embedding-3-small","input":["a","b"],"dimensions":4,"encoding_format":"base64"}`,
		`{"model":"text-embedding-3-small","input":[[1,2,3],[4]]}`,
		`{"model":"text-embedding-3-small","input":"x","dimensions":0}`,
		`{"content":{"parts":[{"text":"hi"}]},"outputDimensionality":3}`,
		`{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"hi"}]}}]}`,
		`{"model":"gpt-4o-mini","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}],"max_output_tokens":16,"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`,
		`{"model":"gpt-4o-mini","input":"hi","text":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}}}}}}}`,
		`{"stream":true}`, `[]`, `null`, `{"messages":"x"}`, "",
	} {
		for i := range fuzzPaths {
			f.Add(uint8(i), []byte(seed))
		}
	}
	fp, err := testsuite.New(testsuite.Options{NoRecord: true, Models: []testsuite.Model{
		{Name: "gpt-4o-mini", Provider: testsuite.OpenAI, Limits: testsuite.Limits{RequestsPerMinute: 1e6, TokensPerMinute: 1e9}},
		{Name: "claude-sonnet-4-5", Provider: testsuite.Anthropic, Limits: testsuite.Limits{RequestsPerMinute: 1e6, InputTokensPerMinute: 1e9, OutputTokensPerMinute: 1e9}},
		{Name: testsuite.DefaultOpenAIEmbeddingModel, Provider: testsuite.OpenAI, Embeddings: true},
		{Name: testsuite.DefaultGeminiEmbeddingModel, Provider: testsuite.Gemini, Embeddings: true},
	}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(fp.Close)
	f.Fuzz(func(t *testing.T, endpoint uint8, body []byte) {
		path := fuzzPaths[int(endpoint)%len(fuzzPaths)]
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("authorization", "Bearer "+testsuite.DefaultKey)
		req.Header.Set("x-api-key", testsuite.DefaultKey)
		req.Header.Set("x-goog-api-key", testsuite.DefaultKey)
		req.Header.Set("content-type", "application/json")
		rec := httptest.NewRecorder()
		fp.ServeHTTP(rec, req)
		switch rec.Code {
		case 200, 400, 404, 413, 429:
		default:
			t.Fatalf("status %d for body %q", rec.Code, body)
		}
		if rec.Code != 200 && !bytes.Contains(rec.Body.Bytes(), []byte(`"error"`)) {
			t.Fatalf("status %d without an error body: %q", rec.Code, rec.Body.Bytes())
		}
	})
}

package testsuite_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tollgate-dev/tollgate/testsuite"
)

// FuzzRequestBodies sends arbitrary bodies to both endpoints: the fake
// provider never panics and always answers with a status a real provider
// could send.
func FuzzRequestBodies(f *testing.F) {
	for _, seed := range []string{
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":5}`,
		`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"claude-sonnet-4-5","max_tokens":5,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":-1}`,
		`{"stream":true}`, `[]`, `null`, `{"messages":"x"}`, "",
	} {
		f.Add(true, []byte(seed))
		f.Add(false, []byte(seed))
	}
	fp, err := testsuite.New(testsuite.Options{NoRecord: true, Models: []testsuite.Model{
		{Name: "gpt-4o-mini", Provider: testsuite.OpenAI, Limits: testsuite.Limits{RequestsPerMinute: 1e6, TokensPerMinute: 1e9}},
		{Name: "claude-sonnet-4-5", Provider: testsuite.Anthropic, Limits: testsuite.Limits{RequestsPerMinute: 1e6, InputTokensPerMinute: 1e9, OutputTokensPerMinute: 1e9}},
	}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(fp.Close)
	f.Fuzz(func(t *testing.T, openai bool, body []byte) {
		path := "/v1/messages"
		if openai {
			path = "/v1/chat/completions"
		}
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("authorization", "Bearer "+testsuite.DefaultKey)
		req.Header.Set("x-api-key", testsuite.DefaultKey)
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

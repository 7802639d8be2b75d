package testsuite_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/testsuite"
)

func TestErrorShapes(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{RequestsPerMinute: 10}, testsuite.Limits{RequestsPerMinute: 10},
		func(o *testsuite.Options) { o.MaxBodyBytes = 4096 })
	oai, ant := fp.URL()+"/v1/chat/completions", fp.URL()+"/v1/messages"
	const okOAI = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`
	const okAnt = `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	bearer := "Bearer " + testsuite.DefaultKey
	tests := []struct {
		name        string
		url, header string
		key, body   string
		status      int
		want        string
	}{
		{"openai unknown key", oai, "Authorization", "Bearer sk-nope", okOAI, 401,
			`{"error":{"message":"Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
		{"openai no key", oai, "Authorization", "", okOAI, 401,
			`{"error":{"message":"Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
		{"openai unknown model", oai, "Authorization", bearer, `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, 404,
			"{\"error\":{\"message\":\"The model `gpt-9` does not exist or you do not have access to it.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"model_not_found\"}}"},
		{"openai model of the other provider", oai, "Authorization", bearer, `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`, 404,
			"{\"error\":{\"message\":\"The model `claude-sonnet-4-5` does not exist or you do not have access to it.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"model_not_found\"}}"},
		{"openai malformed json", oai, "Authorization", bearer, `{"model":`, 400,
			`{"error":{"message":"We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)","type":"invalid_request_error","param":null,"code":null}}`},
		{"openai bad content", oai, "Authorization", bearer, `{"model":"gpt-4o","messages":[{"role":"user","content":42}]}`, 400,
			`{"error":{"message":"Invalid type for 'messages[0].content'.","type":"invalid_request_error","param":"messages[0].content","code":"invalid_type"}}`},
		{"openai no messages", oai, "Authorization", bearer, `{"model":"gpt-4o","messages":[]}`, 400,
			`{"error":{"message":"Missing required parameter: 'messages'.","type":"invalid_request_error","param":"messages","code":"missing_required_parameter"}}`},
		{"openai stream options without stream", oai, "Authorization", bearer, `{"model":"gpt-4o","stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, 400,
			`{"error":{"message":"The 'stream_options' parameter is only allowed when 'stream' is enabled.","type":"invalid_request_error","param":"stream_options","code":"invalid_value"}}`},
		{"openai body too large", oai, "Authorization", bearer, `{"model":"gpt-4o","messages":[{"role":"user","content":"` + text(5000) + `"}]}`, 413,
			`{"error":{"message":"Request body too large.","type":"invalid_request_error","param":null,"code":null}}`},
		{"unknown path", fp.URL() + "/v1/images/generations", "Authorization", bearer, okOAI, 404,
			`{"error":{"message":"Unknown request URL: POST /v1/images/generations.","type":"invalid_request_error","param":null,"code":"unknown_url"}}`},
		{"a chat model at the embeddings endpoint", fp.URL() + "/v1/embeddings", "Authorization", bearer, `{"model":"gpt-4o","input":"hi"}`, 400,
			`{"error":{"message":"The model ` + "`gpt-4o`" + ` does not support this endpoint.","type":"invalid_request_error","param":null,"code":null}}`},
		{"anthropic unknown key", ant, "X-Api-Key", "sk-nope", okAnt, 401,
			`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"*"}`},
		{"anthropic unknown model", ant, "X-Api-Key", testsuite.DefaultKey, `{"model":"claude-9","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, 404,
			`{"type":"error","error":{"type":"not_found_error","message":"model: claude-9"},"request_id":"*"}`},
		{"anthropic malformed json", ant, "X-Api-Key", testsuite.DefaultKey, `[1,2`, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"There was an error parsing the body of your request: it is not valid JSON."},"request_id":"*"}`},
		{"anthropic no max_tokens", ant, "X-Api-Key", testsuite.DefaultKey, `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"},"request_id":"*"}`},
		{"anthropic bad block", ant, "X-Api-Key", testsuite.DefaultKey, `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":[7]}]}`, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"messages.0.content: Input should be a valid string or a list of content blocks"},"request_id":"*"}`},
		{"anthropic body too large", ant, "X-Api-Key", testsuite.DefaultKey, text(5000), 413,
			`{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."},"request_id":"*"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(t, tt.url, tt.header, tt.key, tt.body)
			require.Equal(t, tt.status, resp.StatusCode)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			want := tt.want
			if id := resp.Header.Get("request-id"); id != "" {
				want = replaceStar(want, id)
			}
			require.JSONEq(t, want, body)
		})
	}
	for _, e := range fp.Entries() {
		require.Equal(t, testsuite.Charges{}, e.Charged, "validation failures are not charged")
	}
}

func replaceStar(s, id string) string {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '*' && s[i+1] == '"' {
			return s[:i] + id + s[i+1:]
		}
	}
	return s
}

func TestMethodNotAllowed(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{}, testsuite.Limits{})
	resp, err := http.Get(fp.URL() + "/v1/messages")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

func TestRevokedKey(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{}, testsuite.Limits{})
	c := openaiClient(fp)
	_, _, err := chat(t, c, "hi", 5)
	require.NoError(t, err)
	fp.RevokeKey(testsuite.DefaultKey)
	_, _, err = chat(t, c, "hi", 5)
	apiErr := openaiErr(t, err)
	require.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
	require.Equal(t, "invalid_api_key", apiErr.Code)
	_, err = fp.Spend(scopeOf(gpt), testsuite.Demand{InputTokens: 1})
	require.ErrorIs(t, err, testsuite.ErrUnknownKey)
}

func TestScopeStringMasksKey(t *testing.T) {
	require.Equal(t, "gpt-4o/****test", testsuite.Scope{Key: "sk-tollgate-test", Model: "gpt-4o"}.String())
	require.Equal(t, "gpt-4o/****", testsuite.Scope{Key: "abc", Model: "gpt-4o"}.String())
}

package errors

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

func TestMaskSecrets(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Incorrect API key provided: sk-proj-abc...wxyz.", "Incorrect API key provided: sk-proj-****wxyz."},
		{"Incorrect API key provided: sk-proj-****abcd.", "Incorrect API key provided: sk-proj-****abcd."},
		{"key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123 bad", "key sk-proj-****0123 bad"},
		{"sk-ant-api03-Zz9_yY8-xX7wW6vV5uU4tT3sS2rR1qQ0pP-AbCd", "sk-ant-api03-****AbCd"},
		{"(sk-abcdefghijklmnop1234)", "(sk-****1234)"},
		{"short sk-abcdefgh!", "short sk-****efgh!"},
		{"x-goog-api-key: AIzaSyA1234567890abcdefghijklmnopqrstuv", "x-goog-api-key: AIza****stuv"},
		{"Authorization: Bearer abc.def.ghi", "Authorization: Bearer ****"},
		{"GET /v1/models?key=AIzaSyA12345&alt=sse", "GET /v1/models?key=****&alt=sse"},
		{"token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "token eyJ****dXJl"},
		{"session 3f9a1c7e5b2d4f608a1b3c5d7e9f0a2b4c6d8e0f", "session ****8e0f"},
		// Names and ids that are not secrets stay.
		{"quota GenerateRequestsPerDayPerProjectPerModel-FreeTier", "quota GenerateRequestsPerDayPerProjectPerModel-FreeTier"},
		{"request req_011CTestFixture01 for org-xxxxxxxx", "request req_011CTestFixture01 for org-xxxxxxxx"},
		{"risk-free desk-top", "risk-free desk-top"},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := MaskSecrets(tt.in)
			require.Equal(t, tt.want, got)
			require.Equal(t, got, MaskSecrets(got), "masking is idempotent")
		})
	}
}

// TestMaskSecretsProviderKeys: the key families MaskSecrets used to miss
// (hf_, AKIA and others) are masked, and a prefix without a key body is not
// a key: nothing is added to a bare "sk-".
func TestMaskSecretsProviderKeys(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"hugging face", "Invalid credentials in Authorization header: hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh", "Invalid credentials in Authorization header: hf_****EfGh"},
		{"aws access key id", "The security token included in the request is invalid (AKIAIOSFODNN7EXAMPLE).", "The security token included in the request is invalid (AKIA****MPLE)."},
		{"aws temporary key id", "key ASIAY34FZKBOKMUTVV7A expired", "key ASIA****VV7A expired"},
		{"groq", "Invalid API Key: gsk_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123456789AbCdEfGh", "Invalid API Key: gsk_****EfGh"},
		{"xai", "Incorrect API key provided: xai-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123456789AbCdEfGhIj.", "Incorrect API key provided: xai-****GhIj."},
		{"github", "token ghp_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123 revoked", "token ghp_****0123 revoked"},
		{"slack", "invalid_auth xoxb-123456789012-1234567890123-Ab3dEf6hIj9kLm2nOp5qRs8t", "invalid_auth xoxb-****Rs8t"},
		{"openai service account", "sk-svcacct-Zz9yY8xX7wW6vV5uU4tT3sS2rR1qQ0pP is disabled", "sk-svcacct-****Q0pP is disabled"},
		{"bare sk-", "task-runner sk- isolated", "task-runner sk- isolated"},
		{"sk- and a short word", "short sk-ab!", "short sk-ab!"},
		{"sk-learn", "install sk-learn.", "install sk-learn."},
		{"hf_ and a word", "cache dir hf_cache missing", "cache dir hf_cache missing"},
		{"model with a snapshot date", "The model gpt-4o-realtime-preview-2024-12-17 does not exist", "The model gpt-4o-realtime-preview-2024-12-17 does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MaskSecrets(tt.in)
			require.Equal(t, tt.want, got)
			require.Equal(t, got, MaskSecrets(got), "masking is idempotent")
		})
	}
}

func TestSanitizeMessage(t *testing.T) {
	prompt := "Summarize the merger terms between Acme and Globex, confidential draft v3"
	tests := []struct{ name, in, want string }{
		{
			name: "request URL cut to its host",
			in:   `Post "https://generativelanguage.googleapis.com/v1beta/models/x:generateContent?key=AIzaSecret123": EOF`,
			want: `Post "https://generativelanguage.googleapis.com": EOF`,
		},
		{
			name: "userinfo dropped",
			in:   "proxy http://user:pass@proxy.internal:8080/path failed",
			want: "proxy http://proxy.internal:8080 failed",
		},
		{
			name: "long quoted string elided",
			in:   "Invalid value: '" + prompt + "' for messages[0].role",
			want: "Invalid value: '…' for messages[0].role",
		},
		{
			name: "short quotes and apostrophes kept",
			in:   "Unsupported value: 'temperature' does not support 0.2 with this model's defaults",
			want: "Unsupported value: 'temperature' does not support 0.2 with this model's defaults",
		},
		{name: "control characters collapsed", in: "line one\n\n\tline two\x00", want: "line one line two"},
		{name: "invalid utf-8", in: "bad \xff byte", want: "bad \uFFFD byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, sanitizeMessage(tt.in))
		})
	}
	long := sanitizeMessage(strings.Repeat("é", 400))
	require.LessOrEqual(t, len(long), maxMessageLen)
	require.True(t, strings.HasSuffix(long, "…"))
}

// TestNoSecretsInErrors checks every message and detail the package builds
// from a response that echoes a key and the prompt.
func TestNoSecretsInErrors(t *testing.T) {
	const key = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123"
	const prompt = "Please summarize the confidential board minutes of the October meeting"
	body := openAIBody("invalid_request_error", "invalid_api_key",
		"Incorrect API key provided: "+key+". Your request '"+prompt+"' was not processed. See https://platform.openai.com/account/api-keys?key="+key)
	for _, status := range []int{400, 401, 429, 500} {
		v := ClassifyHTTP(capacity.OpenAI, status, nil, []byte(body), fixtureTime)
		err := ActivityError(v, "openai/gpt-4o/team-a")
		d, ok := DetailsOf(err)
		require.True(t, ok)
		for _, s := range []string{v.Message, v.String(), err.Error(), d.Code, d.QuotaID} {
			require.NotContains(t, s, "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z")
			require.NotContains(t, s, "confidential board minutes")
			require.NotContains(t, s, "/account/api-keys")
		}
		require.Contains(t, v.Message, "sk-proj-****0123")
	}
}

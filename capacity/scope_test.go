package capacity_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

// validScope is a scope every field of which a test case replaces.
var validScope = capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o-mini", Credential: "team-a", Region: "us-east-1"}

// TestKeyShapedNamesRefused: a key or token given where a name belongs is
// refused, whichever field it is in, with ErrKeyShapedName (an
// ErrInvalidScope), and the error does not repeat it.
func TestKeyShapedNamesRefused(t *testing.T) {
	keys := []struct{ name, key string }{
		{"openai project", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123"},
		{"anthropic", "sk-ant-api03-Zz9_yY8-xX7wW6vV5uU4tT3sS2rR1qQ0pP-AbCdEfGh"},
		{"google", "AIzaSyA1234567890abcdefghijklmnopqrstuv"},
		{"groq", "gsk_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123456789AbCdEfGh"},
		{"xai", "xai-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123456789AbCdEfGhIj"},
		{"hugging face", "hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"},
		{"aws access key id", "AKIAIOSFODNN7EXAMPLE"},
		{"jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"},
		{"32 hex", "3f9a1c7e5b2d4f608a1b3c5d7e9f0a2b"},
		{"bearer", "Bearer abc.def.ghi"},
		{"key inside a name", "prod/sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"},
	}
	fields := []struct {
		name string
		set  func(*capacity.Scope, string)
	}{
		{"Credential", func(s *capacity.Scope, v string) { s.Credential = v }},
		{"LimitGroup", func(s *capacity.Scope, v string) { s.LimitGroup = v }},
		{"Region", func(s *capacity.Scope, v string) { s.Region = v }},
		{"Provider", func(s *capacity.Scope, v string) { s.Provider = capacity.Provider(v) }},
	}
	for _, f := range fields {
		for _, k := range keys {
			t.Run(f.name+"/"+k.name, func(t *testing.T) {
				sc := validScope
				f.set(&sc, k.key)
				err := sc.Validate()
				require.ErrorIs(t, err, capacity.ErrKeyShapedName)
				require.ErrorIs(t, err, capacity.ErrInvalidScope)
				require.Contains(t, err.Error(), f.name)
				require.NotContains(t, err.Error(), k.key)
			})
		}
	}
}

// TestNamesAccepted: model names, regions and credential names, including
// those the repository's tests and samples use and Fingerprint's, validate.
func TestNamesAccepted(t *testing.T) {
	tests := []capacity.Scope{
		validScope,
		{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "default"},
		{Provider: capacity.OpenAI, LimitGroup: "gpt-4o mini", Credential: "team/a", Region: "eu"},
		{Provider: capacity.OpenAI, LimitGroup: "gpt-4o-realtime-preview-2024-12-17", Credential: "team:b"},
		{Provider: capacity.Anthropic, LimitGroup: "claude-sonnet-4-5", Credential: "prod/eu", Region: "europe-west4"},
		{Provider: capacity.Anthropic, LimitGroup: "claude-sonnet-4-5-20250929", Credential: "scale-hot"},
		{Provider: capacity.Gemini, LimitGroup: "gemini-2.5-flash", Credential: "batch", Region: "us-central1"},
		{Provider: "bedrock", LimitGroup: "anthropic.claude-3-5-sonnet-20241022-v2:0", Credential: "multiproc", Region: "us-east-1"},
		{Provider: "groq", LimitGroup: "meta-llama/Llama-3.3-70B-Instruct-Turbo", Credential: "hf_cache"},
		{Provider: "xai", LimitGroup: "xai-grok-4-fast-reasoning", Credential: "sk-team"},
		{Provider: capacity.OpenAI, LimitGroup: "m", Credential: "sk-"},
		{Provider: capacity.OpenAI, LimitGroup: "m", Credential: capacity.Fingerprint([]byte("deployment"), []byte("sk-proj-Ab3dEf6hIj9kLm2nOp5q"))},
	}
	for _, sc := range tests {
		t.Run(sc.Key(), func(t *testing.T) {
			require.NoError(t, sc.Validate())
		})
	}
}

func TestValidateMissingFields(t *testing.T) {
	tests := []struct {
		name string
		sc   capacity.Scope
	}{
		{"no provider", capacity.Scope{LimitGroup: "m", Credential: "c"}},
		{"no limit group", capacity.Scope{Provider: capacity.OpenAI, Credential: "c"}},
		{"no credential", capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.sc.Validate()
			require.ErrorIs(t, err, capacity.ErrInvalidScope)
			require.False(t, errors.Is(err, capacity.ErrKeyShapedName))
		})
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// TestKeepTextMarksEveryCredential: keep-text marks each credential of the
// prefix, and the next save of its scopes writes the text state again.
func TestKeepTextMarksEveryCredential(t *testing.T) {
	store, prefix := freshEngineStore(t, redisstore.EngineScripts) // the text state is the scripts'

	ctx := context.Background()
	addr := testenv.RedisAddr()
	scopes := []capacity.Scope{
		{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-a"},
		{Provider: capacity.OpenAI, LimitGroup: "gpt-4o-mini", Credential: "team-a"},
		{Provider: capacity.Anthropic, LimitGroup: "claude-sonnet-4-5", Credential: "team-b"},
	}
	reserve := func(call string) {
		for _, sc := range scopes {
			_, err := store.Reserve(ctx, capacity.Request{Scope: sc, Limits: capacity.Limits{RequestsPerMinute: 60},
				Call: call, Attempt: 1, Charges: capacity.Charges{capacity.Requests: 1}})
			require.NoError(t, err)
		}
	}
	format := func(sc capacity.Scope) string {
		v, err := testenv.RedisClient(t).HGet(ctx, "{"+prefix+":"+sc.CredentialKey()+"}:state:"+sc.Key(), "format").Result()
		require.NoError(t, err)
		return v
	}
	reserve("a")
	for _, sc := range scopes {
		require.Equal(t, "4", format(sc), "packed only: no 5.x worker here")
	}

	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(ctx, []string{"keep-text", "-redis", addr, "-prefix", prefix, "-json"}, &out, &errOut), errOut.String())
	var res keepTextResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	assert.Equal(t, keepTextResult{Credentials: 2, For: "24h0m0s"}, res)
	reserve("b")
	for _, sc := range scopes {
		assert.Equal(t, "3", format(sc), "%s keeps its text again", sc.Key())
	}

	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"keep-text", "-redis", addr, "-prefix", prefix, "-for", "1h"}, &out, &errOut), errOut.String())
	assert.Equal(t, "2 credentials in Redis at \""+addr+"\" under prefix \""+prefix+"\" keep the text state for 1h0m0s\n", out.String())
}

func TestKeepTextRefusesWhatItCannotDo(t *testing.T) {
	_, prefix := freshStore(t)
	addr := testenv.RedisAddr()
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"help", []string{"-h"}, 0, "usage: tollgate keep-text [flags]"},
		{"an argument", []string{"-redis", addr, "openai/gpt-4o/team-a"}, 2, "takes no arguments"},
		{"zero", []string{"-redis", addr, "-for", "0s"}, 2, "-for 0s: want above 0 and at most 720h0m0s"},
		{"too long", []string{"-redis", addr, "-for", "1000h"}, 2, "want above 0 and at most 720h0m0s"},
		{"nothing stored", []string{"-redis", addr, "-prefix", prefix}, 3, "no credentials in Redis at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), append([]string{"keep-text"}, tt.args...), &out, &errOut)
			assert.Equal(t, tt.code, code, errOut.String())
			assert.Contains(t, out.String()+errOut.String(), tt.stderr)
		})
	}
}

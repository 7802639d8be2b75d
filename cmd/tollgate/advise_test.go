package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/learn"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

func TestAdviseShowsWhatWasLearned(t *testing.T) {
	store, prefix := freshStore(t)
	ctx := context.Background()
	oa := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-a"}
	an := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "claude-sonnet-4-5", Credential: "team-a"}
	// 1000 calls: outputs of 100 to 399, and one in a thousand of 410.
	for i := range 1000 {
		out := int64(100 + i%300)
		if i%1000 == 999 {
			out = 410
		}
		require.NoError(t, store.Learn(ctx, oa, "Summarize", learn.Sample{OutputTokens: out, MaxTokens: 8192, InputTokens: 1000}))
	}
	for range 30 {
		require.NoError(t, store.Learn(ctx, an, "classify", learn.Sample{OutputTokens: 16, MaxTokens: 1024, InputTokens: 1200, InputEstimate: 1000}))
	}

	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(ctx, []string{"advise", "-redis", testenv.RedisAddr(), "-prefix", prefix, "-json"}, &out, &errOut), errOut.String())
	var rep adviseReport
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	assert.Equal(t, source{Redis: testenv.RedisAddr(), Mode: "single", Prefix: prefix}, rep.Source)
	assert.Empty(t, rep.Empty)
	require.Len(t, rep.Advice, 2)
	a, c := rep.Advice[0], rep.Advice[1] // sorted by scope key: anthropic first
	assert.Equal(t, "openai/gpt-4o/team-a", c.Scope)
	assert.Equal(t, "Summarize", c.Kind)
	assert.InDelta(t, 1000, c.Calls, 1e-9)
	assert.InDelta(t, 8192, c.MaxTokens, 0)
	assert.InDelta(t, 1000, c.Input, 0)
	assert.GreaterOrEqual(t, c.OutputP999, 399.0)
	assert.LessOrEqual(t, c.OutputP999, 410*1.09)
	assert.LessOrEqual(t, c.OutputP50, c.OutputP99)
	assert.InDelta(t, 1000+8192, c.Reserved, 0)
	assert.InDelta(t, (1000+8192)/(1000+c.OutputP999), c.TPMFactor, 0.05)
	assert.Zero(t, c.InputRatioP95, "tiktoken counts: no ratio")
	assert.Equal(t, "anthropic/claude-sonnet-4-5/team-a", a.Scope)
	assert.Equal(t, "classify", a.Kind)
	assert.InDelta(t, 1.2, a.InputRatioP95, 0.12)

	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"advise", "-redis", testenv.RedisAddr(), "-prefix", prefix}, &out, &errOut), errOut.String())
	text := out.String()
	assert.Contains(t, text, "SCOPE")
	assert.Contains(t, text, "max_tokens 8192, p99.9 output ")
	assert.Regexp(t, `openai/gpt-4o/team-a +Summarize +1000 .*: 6\.[0-9]× the TPM needed\n`, text)
	assert.Contains(t, text, "on OpenAI accounting; anthropic reserves the learned p95 and settles to actual use")
	t.Log("\n" + text)
}

func TestAdviseRefusesWhatItCannotDo(t *testing.T) {
	_, prefix := freshStore(t)
	addr := testenv.RedisAddr()
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"help", []string{"-h"}, 0, "usage: tollgate advise [flags]"},
		{"bad flag", []string{"-bogus"}, 2, "flag provided but not defined: -bogus"},
		{"an argument", []string{"openai/gpt-4o/team-a"}, 2, "unexpected argument"},
		{"empty store", []string{"-redis", addr, "-prefix", prefix}, 3, "nothing learned in Redis at \"" + addr + "\" under prefix \"" + prefix + "\""},
		{"empty store, json", []string{"-redis", addr, "-prefix", prefix, "-json"}, 3, "nothing learned"},
		{"bad address", []string{"-redis", "127.0.0.1:1"}, 1, "cannot reach Redis at \"127.0.0.1:1\""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			assert.Equal(t, tt.code, run(context.Background(), append([]string{"advise"}, tt.args...), &out, &errOut))
			assert.Contains(t, errOut.String(), tt.stderr)
			if tt.name == "help" {
				assert.True(t, strings.Contains(errOut.String(), "-json"), "the flags are listed")
			}
			if tt.name == "empty store, json" {
				var rep adviseReport
				require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
				assert.Empty(t, rep.Advice)
				assert.Contains(t, rep.Empty, "nothing learned in Redis at")
				assert.Contains(t, out.String(), `"advice":[]`)
			}
		})
	}
}

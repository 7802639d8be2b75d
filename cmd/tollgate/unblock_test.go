package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// blockedStore returns a store under a fresh prefix whose scope sc has used
// capacity and carries a scope block (a century-long quota block, issue 13)
// and a credential block.
func blockedStore(t *testing.T, sc capacity.Scope) (*redisstore.Store, string) {
	t.Helper()
	store, prefix := freshStore(t)
	ctx := context.Background()
	var c capacity.Charges
	c[capacity.Requests] = 1
	_, err := store.Reserve(ctx, capacity.Request{Scope: sc, Limits: capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1},
		Call: "call-a", Attempt: 1, Charges: c})
	require.NoError(t, err)
	now := time.Now()
	require.NoError(t, store.Block(ctx, sc, capacity.Block{Reason: capacity.QuotaExhausted, Until: now.AddDate(100, 0, 0)}))
	require.NoError(t, store.Block(ctx, sc, capacity.Block{Reason: capacity.CredentialDisabled, Until: now.Add(time.Hour), Credential: true}))
	return store, prefix
}

// freshStore returns a store on the test Redis under a fresh prefix; its keys
// (and those of prefixes it begins) are deleted when t ends.
func freshStore(t *testing.T) (*redisstore.Store, string) {
	t.Helper()
	return freshEngineStore(t, redisstore.Options{}.Engine)
}

// freshEngineStore is freshStore starting new scopes on engine.
func freshEngineStore(t *testing.T, engine redisstore.Engine) (*redisstore.Store, string) {
	t.Helper()
	rdb := testenv.RedisClient(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "tgcli-" + hex.EncodeToString(b[:])
	store, err := redisstore.New(rdb, redisstore.Options{Prefix: prefix, Engine: engine})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = store.Close()
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, "{"+prefix+"*", 100).Iterator()
		for iter.Next(ctx) {
			_ = rdb.Del(ctx, iter.Val()).Err()
		}
	})
	return store, prefix
}

func blocksOf(t *testing.T, store *redisstore.Store, sc capacity.Scope) []capacity.Block {
	t.Helper()
	snap, err := store.Snapshot(context.Background(), sc)
	require.NoError(t, err)
	return snap.Blocks
}

func TestUnblockLiftsTheScopeBlock(t *testing.T) {
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-a"}
	store, prefix := blockedStore(t, sc)
	ctx := context.Background()
	addr := testenv.RedisAddr()

	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(ctx, []string{"unblock", "-redis", addr, "-prefix", prefix, sc.Key()}, &out, &errOut), errOut.String())
	assert.Contains(t, out.String(), "openai/gpt-4o/team-a: lifted quota_exhausted for ")
	blocks := blocksOf(t, store, sc)
	require.Len(t, blocks, 1, "the credential's block stays without -credential")
	assert.True(t, blocks[0].Credential)

	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"unblock", "-redis", addr, "-prefix", prefix, sc.Key(), "-credential", "-json"}, &out, &errOut), errOut.String())
	var res unblockResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	assert.Equal(t, sc.Key(), res.Scope)
	assert.Equal(t, "openai/team-a", res.Credential)
	require.Len(t, res.Lifted, 1)
	assert.Contains(t, res.Lifted[0], "credential_disabled for ")
	assert.Empty(t, blocksOf(t, store, sc))

	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"unblock", "-redis", addr, "-prefix", prefix, sc.Key()}, &out, &errOut), errOut.String())
	assert.Equal(t, "openai/gpt-4o/team-a: no block to lift\n", out.String())
}

func TestUnblockRefusesWhatItCannotDo(t *testing.T) {
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-a"}
	_, prefix := blockedStore(t, sc)
	addr := testenv.RedisAddr()
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"help", []string{"-h"}, 0, "usage: tollgate unblock [flags] SCOPE"},
		{"no scope", []string{"-redis", addr}, 2, "want exactly one SCOPE"},
		{"two scopes", []string{"-redis", addr, sc.Key(), "openai/gpt-4o/team-b"}, 2, "want exactly one SCOPE"},
		{"not a scope key", []string{"-redis", addr, "gpt-4o"}, 2, "is not provider/group/credential"},
		{"bad flag", []string{"-bogus", sc.Key()}, 2, "flag provided but not defined: -bogus"},
		{"unknown scope", []string{"-redis", addr, "-prefix", prefix, "openai/gpt-4o/team-z"}, 1,
			"unknown scope openai/gpt-4o/team-z: Redis at \"" + addr + "\" has no state for it under prefix \"" + prefix + "\"; known scopes: openai/gpt-4o/team-a"},
		{"unknown prefix", []string{"-redis", addr, "-prefix", prefix + "-nope", sc.Key()}, 3,
			"no scopes in Redis at \"" + addr + "\" under prefix \"" + prefix + "-nope\": nothing to unblock"},
		{"unknown prefix, credential", []string{"-redis", addr, "-prefix", prefix + "-nope", "-credential", sc.Key()}, 3,
			"no scopes and no block of credential openai/team-a in Redis at"},
		{"bad address", []string{"-redis", "127.0.0.1:1", sc.Key()}, 1, "cannot reach Redis at \"127.0.0.1:1\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			assert.Equal(t, tt.code, run(context.Background(), append([]string{"unblock"}, tt.args...), &out, &errOut))
			assert.Contains(t, errOut.String(), tt.stderr)
		})
	}
}

// With -json an empty store is an empty result with the reason.
func TestUnblockJSONOfAnEmptyStore(t *testing.T) {
	_, prefix := freshStore(t)
	var out, errOut bytes.Buffer
	require.Equal(t, exitEmpty, run(context.Background(), []string{"unblock", "-redis", testenv.RedisAddr(), "-prefix", prefix, "-json", "openai/gpt-4o/team-a"}, &out, &errOut))
	var res unblockResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	assert.Equal(t, "openai/gpt-4o/team-a", res.Scope)
	assert.Empty(t, res.Lifted)
	assert.Contains(t, res.Empty, "no scopes in Redis at")
}

func TestUnblockNamesAQuietCredential(t *testing.T) {
	// The credential is blocked but none of its scopes has state left: the
	// scope is there to name the credential.
	store, prefix := freshStore(t)
	ctx := context.Background()
	sc := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "claude-sonnet-4-5", Credential: "team-q"}
	require.NoError(t, store.Block(ctx, sc, capacity.Block{Reason: capacity.CredentialDisabled, Until: time.Now().Add(time.Hour), Credential: true}))

	var out, errOut bytes.Buffer
	require.Equal(t, 1, run(ctx, []string{"unblock", "-redis", testenv.RedisAddr(), "-prefix", prefix, sc.Key()}, &out, &errOut),
		"without -credential there is nothing of the scope's own to lift")
	// The block's time left is read as the command runs: an hour, less what
	// the machine took since the block.
	assert.Regexp(t, `but its credential anthropic/team-q is blocked \(credential_disabled for (1h0m0s|59m5\ds)\): add -credential to lift that`, errOut.String())
	require.Equal(t, 0, run(ctx, []string{"unblock", "-redis", testenv.RedisAddr(), "-prefix", prefix, "-credential", sc.Key()}, &out, &errOut), errOut.String())
	assert.Empty(t, blocksOf(t, store, sc))
}

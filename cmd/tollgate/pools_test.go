package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

func TestPoolFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want poolFlag
		err  string
	}{
		{[]string{"p=a,b,c"}, poolFlag{"p": {"a", "b", "c"}}, ""},
		{[]string{"p=a", "q=b,c"}, poolFlag{"p": {"a"}, "q": {"b", "c"}}, ""},
		{[]string{"p"}, nil, "want name=member"},
		{[]string{"p="}, nil, "want name=member"},
		{[]string{"p=a,,b"}, nil, "empty member"},
		{[]string{"p=a", "p=b"}, nil, "given twice"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			p := poolFlag{}
			var err error
			for _, a := range tc.args {
				if err = p.Set(a); err != nil {
					break
				}
			}
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, p)
		})
	}
}

// TestPoolStatus: each member of a pool on each quota where the pool was
// used, with its state as the gate reads it: ok, paused (cooling), out
// (refused on every model, or without access to this one).
func TestPoolStatus(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	store := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: capacitytest.NewManualClock(t0)})
	sc := func(group, key string) capacity.Scope {
		return capacity.Scope{Provider: capacity.OpenAI, LimitGroup: group, Credential: key}
	}
	limits := capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1, Burst: 10 * time.Second}
	var c capacity.Charges
	c[capacity.Requests] = 1
	for i, key := range []string{"key-1", "key-2", "key-3", "key-3"} {
		_, err := store.Reserve(ctx, capacity.Request{Scope: sc("gpt-4o", key), Limits: limits, Call: "c" + string(rune('0'+i)), Attempt: 1, Charges: c})
		require.NoError(t, err)
	}
	require.NoError(t, store.Block(ctx, sc("gpt-4o", "key-1"), capacity.Block{Reason: capacity.CredentialDisabled, Credential: true,
		Until: t0.Add(time.Minute), HalfOpen: 30 * time.Second, Detail: "invalid_api_key"}))
	require.NoError(t, store.Block(ctx, sc("gpt-4o", "key-2"), capacity.Block{Reason: capacity.Cooldown, Until: t0.Add(3 * time.Second), Detail: "rate_limit_exceeded"}))
	require.NoError(t, store.Block(ctx, sc("gpt-4o-mini", "key-3"), capacity.Block{Reason: capacity.CredentialDisabled, Until: t0.Add(time.Minute), Detail: "model_not_found"}))
	scopes := []capacity.Scope{sc("gpt-4o", "key-1"), sc("gpt-4o", "key-2"), sc("gpt-4o", "key-3"), sc("gpt-4o-mini", "key-3"), sc("gpt-4o", "team-a")}

	pools, err := poolsOf(ctx, store, scopes, poolFlag{"pool": {"key-1", "key-2", "key-3"}})
	require.NoError(t, err)
	require.Len(t, pools, 2, "the pool on gpt-4o and on gpt-4o-mini")
	p := pools[0]
	assert.Equal(t, "openai/gpt-4o", p.Quota)
	assert.Equal(t, 2, p.Usable)
	require.Len(t, p.Members, 3)
	k1 := p.Members[0]
	assert.InDelta(t, 0.1, k1.Used, 1e-9, "one of a 10-request bucket")
	k1.Used = 0
	assert.Equal(t, memberStatus{Credential: "key-1", Scope: "openai/gpt-4o/key-1", State: "out", Reason: "credential_disabled", Detail: "invalid_api_key",
		Until: t0.Add(time.Minute), InFlight: 1, left: time.Minute}, k1)
	assert.Equal(t, "paused", p.Members[1].State)
	assert.Equal(t, "cooldown", p.Members[1].Reason)
	assert.Equal(t, "ok", p.Members[2].State)
	assert.InDelta(t, 0.2, p.Members[2].Used, 1e-9)
	mini := pools[1]
	assert.Equal(t, "openai/gpt-4o-mini", mini.Quota)
	assert.Equal(t, 1, mini.Usable, "key-1 refused on every model, key-3 without access to it, key-2 not used there yet")
	assert.Equal(t, []string{"out", "ok", "out"}, []string{mini.Members[0].State, mini.Members[1].State, mini.Members[2].State})
	assert.Equal(t, "no_access", mini.Members[2].Reason)

	var out bytes.Buffer
	require.NoError(t, printPools(&out, pools))
	t.Log("\n" + out.String())
	for _, want := range []string{"POOL", "USABLE", "2/3", "out: credential_disabled (invalid_api_key) for 1m0s", "paused: cooldown (rate_limit_exceeded) for 3s", "out: no_access (model_not_found)"} {
		assert.Contains(t, out.String(), want)
	}
}

// TestStatusShowsPoolsFromRedis: `tollgate status -pool` reads the members
// from Redis, in the table and as JSON lines after the scopes'.
func TestStatusShowsPoolsFromRedis(t *testing.T) {
	addr := testenv.RedisAddr()
	rdb := testenv.RedisClient(t)
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "tgpool-" + hex.EncodeToString(b[:])
	store, err := redisstore.New(rdb, redisstore.Options{Prefix: prefix})
	require.NoError(t, err)
	defer store.Close()
	t.Cleanup(func() {
		keys, _ := rdb.Keys(ctx, "{"+prefix+":*").Result()
		if len(keys) > 0 {
			for _, k := range keys {
				_ = rdb.Del(ctx, k)
			}
		}
	})
	limits := capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1}
	var c capacity.Charges
	c[capacity.Requests] = 1
	for _, key := range []string{"key-1", "key-2"} {
		_, err := store.Reserve(ctx, capacity.Request{Scope: capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: key},
			Limits: limits, Call: "call-" + key, Attempt: 1, Charges: c})
		require.NoError(t, err)
	}
	require.NoError(t, store.Block(ctx, capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "key-1"},
		capacity.Block{Reason: capacity.CredentialDisabled, Credential: true, Until: time.Now().Add(time.Minute), Detail: "invalid_api_key"}))

	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(ctx, []string{"status", "-redis", addr, "-prefix", prefix, "-pool", "pool=key-1,key-2,key-3"}, &out, &errOut), errOut.String())
	t.Log("\n" + out.String())
	assert.Contains(t, out.String(), "out: credential_disabled (invalid_api_key)")
	assert.Contains(t, out.String(), "2/3", "key-1 out; key-2 ok, key-3 never used")

	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"status", "-redis", addr, "-prefix", prefix, "-json", "-pool", "pool=key-1,key-2,key-3"}, &out, &errOut), errOut.String())
	var rep statusReport // one object: the scopes, then the pools
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	require.Len(t, rep.Scopes, 2)
	require.Len(t, rep.Pools, 1)
	ps := rep.Pools[0]
	assert.Equal(t, "pool", ps.Pool)
	assert.Equal(t, "openai/gpt-4o", ps.Quota)
	assert.Equal(t, 2, ps.Usable)
	require.Len(t, ps.Members, 3)
	assert.Equal(t, "out", ps.Members[0].State)
	assert.Equal(t, "ok", ps.Members[1].State)
}

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
	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

func TestStatusShowsScopesFromRedis(t *testing.T) {
	addr := testenv.RedisAddr()
	rdb := testenv.RedisClient(t)
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "tgcli-" + hex.EncodeToString(b[:])
	store, err := redisstore.New(rdb, redisstore.Options{Prefix: prefix})
	require.NoError(t, err)
	defer store.Close()
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-a"}
	limits := capacity.Limits{RequestsPerMinute: 60, TokensPerMinute: 60000, MaxInFlight: 10, SafetyMargin: 1}
	var c capacity.Charges
	c[capacity.Requests], c[capacity.Tokens], c[capacity.InFlight] = 1, 1000, 1
	for i := range 6 { // 5 fit the burst, the sixth books a ticket
		_, err := store.Reserve(ctx, capacity.Request{Scope: sc, Limits: limits, Call: "call-" + string(rune('a'+i)), Attempt: 1, Charges: c, Book: true})
		require.NoError(t, err)
	}
	require.NoError(t, store.Block(ctx, sc, capacity.Block{Reason: capacity.Cooldown, Until: time.Now().Add(time.Minute)}))

	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(ctx, []string{"status", "-redis", addr, "-prefix", prefix, "-json"}, &out, &errOut), errOut.String())
	var st scopeStatus
	require.NoError(t, json.Unmarshal(out.Bytes(), &st))
	assert.Equal(t, sc.Key(), st.Scope)
	assert.Equal(t, 5, st.InFlight, "the burst admitted five")
	assert.Equal(t, 1, st.Tickets)
	assert.Positive(t, st.QueueAge)
	assert.InDelta(t, 5000, st.Capacities["tokens"], 1e-9)
	require.Len(t, st.Blocks, 1)
	assert.True(t, strings.HasPrefix(st.Blocks[0], "cooldown"))

	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"status", "-redis", addr, "-prefix", prefix}, &out, &errOut))
	assert.Contains(t, out.String(), "openai/gpt-4o/team-a")
	assert.Contains(t, out.String(), "5/10")
	_ = rdb.Del(ctx, "{"+prefix+":openai/team-a}:epoch")
}

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

// TestStatusShowsFlowsAndKeys: a scope's fair-queuing flows (class, key,
// rank, waiting tickets, granted tokens, lead) and its keys with caps (the
// day's tokens, the share buckets) reach the JSON and the table, with the
// classes named by -classes. It reads a memory store's snapshot, the
// store that keeps fairness state today.
func TestStatusShowsFlowsAndKeys(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	store := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: capacitytest.NewManualClock(t0)})
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-a"}
	limits := capacity.Limits{RequestsPerMinute: 60, TokensPerMinute: 60000, Burst: 2 * time.Second, SafetyMargin: 1} // 2 requests, 2000 tokens
	var c capacity.Charges
	c[capacity.Requests], c[capacity.Tokens], c[capacity.InFlight] = 1, 600, 1
	reserve := func(call string, class capacity.Class, f capacity.Fairness) capacity.Reservation {
		t.Helper()
		r, err := store.Reserve(ctx, capacity.Request{Scope: sc, Limits: limits, Call: call, Attempt: 1, Charges: c, Class: class, Fairness: f, Book: true})
		require.NoError(t, err)
		return r
	}
	acme := capacity.Fairness{Key: "acme", Share: 0.5, TokensPerDay: 100000}
	require.True(t, reserve("a1", capacity.Bulk, acme).Granted)
	require.True(t, reserve("b1", capacity.Bulk, capacity.Fairness{Key: "beta"}).Granted)
	require.True(t, reserve("b2", capacity.Bulk, capacity.Fairness{Key: "beta"}).Booked, "the bucket is empty: b2 books")
	require.True(t, reserve("s1", capacity.Standard, capacity.Fairness{}).Booked)
	snap, err := store.Snapshot(ctx, sc)
	require.NoError(t, err)

	for _, tc := range []struct {
		name  string
		names []string
		bulk  string
	}{
		{"built-in names", builtinClassNames(), "bulk"},
		{"-classes names", []string{"std", "live", "batch"}, "batch"},
		{"too few names", []string{"std"}, "class(2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := statusOf(snap, tc.names)
			b, err := json.Marshal(st)
			require.NoError(t, err)
			var back scopeStatus
			require.NoError(t, json.Unmarshal(b, &back))
			flows := map[string]flowStatus{}
			for _, f := range back.Flows {
				flows[f.Class+"/"+f.Key] = f
			}
			require.Len(t, flows, 3, "%+v", back.Flows)
			a, beta := flows[tc.bulk+"/acme"], flows[tc.bulk+"/beta"]
			assert.Equal(t, int(capacity.Bulk), a.ClassIndex)
			assert.Equal(t, 0, a.Rank, "bulk ranks 0")
			assert.Equal(t, 600.0, a.Granted)
			assert.Zero(t, a.Waiting)
			assert.Equal(t, 1, beta.Waiting)
			assert.Positive(t, beta.Queue)
			assert.Equal(t, 600.0, beta.Granted, "the booked ticket is not granted yet")
			assert.Positive(t, beta.Ahead, "beta booked a call ahead of the virtual time")
			assert.Equal(t, 1, flows[className(capacity.Standard, tc.names)+"/"].Waiting)

			require.Len(t, back.Keys, 1, "only acme has caps")
			k := back.Keys[0]
			assert.Equal(t, "acme", k.Key)
			assert.Equal(t, 600.0, k.DayUsed)
			assert.True(t, k.DayEnd.After(t0))
			assert.Equal(t, map[string]float64{"requests": 0, "tokens": 400}, k.Share, "half of 2 requests and 2000 tokens, less the call")
		})
	}

	var out bytes.Buffer
	require.NoError(t, printStatus(&out, []scopeStatus{statusOf(snap, builtinClassNames())}))
	text := out.String()
	t.Log("\n" + text)
	for _, want := range []string{"CLASS", "GRANTED TOKENS", "bulk", "acme", "beta", "DAY USED", "requests 0 tokens 400", "2026-03-03T00:00:00Z"} {
		assert.Contains(t, text, want)
	}
}

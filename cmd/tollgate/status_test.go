package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

func TestStatusShowsScopesFromRedis(t *testing.T) {
	addr := testenv.RedisAddr()
	ctx := context.Background()
	store, prefix := freshStore(t)
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
	before := time.Now()
	require.Equal(t, 0, run(ctx, []string{"status", "-redis", addr, "-prefix", prefix, "-json"}, &out, &errOut), errOut.String())
	after := time.Now()
	var rep statusReport
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	assert.Equal(t, source{Redis: addr, Mode: "single", Prefix: prefix}, rep.Source)
	// The report's time is the command's: between readings of the same
	// clock taken around it.
	assert.Falsef(t, rep.At.Before(before) || rep.At.After(after), "report at %v, run between %v and %v", rep.At, before, after)
	assert.Empty(t, rep.Empty)
	assert.Empty(t, rep.Error)
	require.Len(t, rep.Scopes, 1)
	st := rep.Scopes[0]
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
	once := strings.Count(out.String(), sc.Key())

	// -watch: one reading per period, each a whole report.
	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"status", "-redis", addr, "-prefix", prefix, "--json", "--watch", "0.001", "--count", "3"}, &out, &errOut), errOut.String())
	dec := json.NewDecoder(&out)
	n := 0
	for dec.More() {
		var r statusReport
		require.NoError(t, dec.Decode(&r))
		require.Len(t, r.Scopes, 1)
		assert.Equal(t, sc.Key(), r.Scopes[0].Scope)
		n++
	}
	assert.Equal(t, 3, n)
	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"status", "-redis", addr, "-prefix", prefix, "-watch", "1ms", "-count", "2"}, &out, &errOut), errOut.String())
	assert.Equal(t, 2, strings.Count(out.String(), `Redis at "`+addr+`" under prefix "`+prefix+`" at `), out.String())
	assert.Equal(t, 2*once, strings.Count(out.String(), sc.Key()))
	assert.NotContains(t, out.String(), "\x1b[", "no screen clearing off a terminal")
}

// An empty store, or a prefix with nothing under it, exits 3 with a
// message naming where status looked (and the prefixes that hold state);
// -json prints an empty report with that reason.
func TestStatusOfAnEmptyStore(t *testing.T) {
	other, otherPrefix := freshStore(t)
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-a"}
	var c capacity.Charges
	c[capacity.Requests] = 1
	_, err := other.Reserve(context.Background(), capacity.Request{Scope: sc, Limits: capacity.Limits{RequestsPerMinute: 60}, Call: "c", Attempt: 1, Charges: c})
	require.NoError(t, err)
	_, prefix := freshStore(t)
	addr := testenv.RedisAddr()

	var out, errOut bytes.Buffer
	require.Equal(t, exitEmpty, run(context.Background(), []string{"status", "-redis", addr, "-prefix", prefix}, &out, &errOut))
	assert.Empty(t, out.String())
	msg := errOut.String()
	assert.Contains(t, msg, `tollgate: no scopes in Redis at "`+addr+`" under prefix "`+prefix+`": no worker has used a scope recently`)
	assert.Contains(t, msg, "check -prefix")
	if !strings.Contains(msg, "and ") { // the hint lists five prefixes at most
		assert.Contains(t, msg, `"`+otherPrefix+`"`, "the prefixes that do hold state")
	}

	out.Reset()
	errOut.Reset()
	require.Equal(t, exitEmpty, run(context.Background(), []string{"status", "-redis", addr, "-prefix", prefix, "-json"}, &out, &errOut))
	var rep statusReport
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	assert.NotNil(t, rep.Scopes)
	assert.Empty(t, rep.Scopes)
	assert.Contains(t, rep.Empty, "no scopes in Redis at")
	assert.Contains(t, out.String(), `"scopes":[]`, "an empty list, not null")
	assert.Contains(t, errOut.String(), "no scopes")

	// A watch shows the empty reading and goes on.
	out.Reset()
	require.Equal(t, exitEmpty, run(context.Background(), []string{"status", "-redis", addr, "-prefix", prefix, "-watch", "1ms", "-count", "2"}, &out, &errOut))
	assert.Equal(t, 2, strings.Count(out.String(), "no scopes in Redis"))
}

func TestStatusRefusesBadArguments(t *testing.T) {
	for _, tt := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"an argument", []string{"openai/gpt-4o/team-a"}, "unexpected argument"},
		{"bad watch", []string{"-watch", "soon"}, "want a duration (5s) or seconds (5)"},
		{"negative watch", []string{"-watch", "-1s"}, "want >= 0"},
		{"negative count", []string{"-count", "-1"}, "-count is -1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			assert.Equal(t, exitUsage, run(context.Background(), append([]string{"status"}, tt.args...), &out, &errOut))
			assert.Contains(t, errOut.String(), tt.stderr)
		})
	}
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

// TestStatusNamesReportedLimits: a budget with no configured limit runs on
// the limit the provider reported, and status says so.
func TestStatusNamesReportedLimits(t *testing.T) {
	ctx := context.Background()
	store := capacity.NewMemoryStore(capacity.MemoryOptions{})
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-a"}
	var c capacity.Charges
	c[capacity.Requests], c[capacity.Tokens], c[capacity.InFlight] = 1, 100, 1
	res, err := store.Reserve(ctx, capacity.Request{Scope: sc, Limits: capacity.Limits{RequestsPerMinute: 60}, Call: "a", Attempt: 1, Charges: c})
	require.NoError(t, err)
	var obs capacity.Observation
	obs.Dims[capacity.Tokens] = capacity.DimensionObservation{HasLimit: true, Limit: 30000, HasRemaining: true, Remaining: 29900}
	obs.Mark = res.Lease.Mark
	require.NoError(t, store.Observe(ctx, sc, obs))
	snap, err := store.Snapshot(ctx, sc)
	require.NoError(t, err)

	st := statusOf(snap, builtinClassNames())
	assert.Equal(t, []string{"tokens"}, st.Reported, "requests are configured, tokens reported")
	var out bytes.Buffer
	require.NoError(t, printStatus(&out, []scopeStatus{st}))
	assert.Contains(t, out.String(), "tokens")
	assert.Contains(t, out.String(), "(reported)")
	assert.Equal(t, 1, strings.Count(out.String(), "(reported)"))
}

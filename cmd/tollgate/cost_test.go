package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/ledger"
	"github.com/tollgate-dev/tollgate/capacity/spend"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	ab "github.com/tollgate-dev/tollgate/samples/assistant-batch"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
)

// costLines runs `tollgate cost -json` with args and decodes its lines.
func costLines(t *testing.T, args ...string) []costLine {
	t.Helper()
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), append([]string{"cost", "-json"}, args...), &out, &errOut), errOut.String())
	var lines []costLine
	dec := json.NewDecoder(&out)
	for dec.More() {
		var l costLine
		require.NoError(t, dec.Decode(&l))
		lines = append(lines, l)
	}
	return lines
}

func TestCostShowsTheLedger(t *testing.T) {
	store, prefix := freshStore(t)
	ctx := context.Background()
	oa := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-a"}
	an := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "claude-sonnet-4-5", Credential: "team-a"}
	today, _ := ledger.Day(time.Now(), capacity.DayBoundary{})
	record := func(lease, day string, sc capacity.Scope, tenant, wf string, tok ledger.Tokens, cost float64) {
		_, err := store.Record(ctx, ledger.Entry{Lease: lease, Day: day, Scope: sc, Tenant: tenant, WorkflowType: wf, Tokens: tok, Cost: cost, Unpriced: cost == 0})
		require.NoError(t, err)
	}
	record("a#1", today, oa, "acme", "Assistant", ledger.Tokens{Input: 800, CachedInput: 200, Output: 100}, 0.0035)
	record("b#1", today, oa, "acme", "Assistant", ledger.Tokens{Input: 1000, Output: 50}, 0.003)
	record("c#1", today, an, "", "Batch", ledger.Tokens{Input: 10, CachedInput: 5000, Output: 7}, 0)
	record("d#1", "2026-01-02", oa, "globex", "Batch", ledger.Tokens{Input: 1, Output: 1}, 0.25)
	addr := testenv.RedisAddr()

	lines := costLines(t, "-redis", addr, "-prefix", prefix)
	require.Len(t, lines, 3)
	old, acme, none := lines[0], lines[2], lines[1] // by day, then scope key: anthropic first
	assert.Equal(t, costLine{Day: "2026-01-02", Scope: "openai/gpt-4o/team-a", Provider: "openai", Tenant: "globex", WorkflowType: "Batch",
		Calls: 1, Tokens: ledger.Tokens{Input: 1, Output: 1}, Cost: 0.25}, old)
	assert.Equal(t, costLine{Day: today, Scope: "openai/gpt-4o/team-a", Provider: "openai", Tenant: "acme", WorkflowType: "Assistant",
		Calls: 2, Tokens: ledger.Tokens{Input: 1800, CachedInput: 200, Output: 150}}, withoutCost(acme))
	assert.InDelta(t, 0.0065, acme.Cost, 1e-12)
	assert.Equal(t, "anthropic/claude-sonnet-4-5/team-a", none.Scope)
	assert.Equal(t, int64(1), none.Unpriced)

	assert.Len(t, costLines(t, "-redis", addr, "-prefix", prefix, "-day", today), 2, "-day")
	assert.Equal(t, []costLine{acme}, costLines(t, "-redis", addr, "-prefix", prefix, "-tenant", "acme"), "-tenant")
	assert.Equal(t, []costLine{none}, costLines(t, "-redis", addr, "-prefix", prefix, "-tenant", "-"), "-tenant - is no tenant")

	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(ctx, []string{"cost", "-redis", addr, "-prefix", prefix, "-day", today}, &out, &errOut), errOut.String())
	text := out.String()
	assert.Regexp(t, `(?m)^DAY +SCOPE +TENANT +WORKFLOW +CALLS +UNPRICED +INPUT +CACHED +OUTPUT +COST$`, text)
	assert.Regexp(t, `(?m)^`+today+` +openai/gpt-4o/team-a +acme +Assistant +2 +0 +1800 +200 +150 +0\.006500$`, text)
	assert.Regexp(t, `(?m)^`+today+` +anthropic/claude-sonnet-4-5/team-a +- +Batch +1 +1 +10 +5000 +7 +0\.000000$`, text)
	assert.Regexp(t, `(?m)^total +3 +1 +1810 +5200 +157 +0\.006500$`, text)
	t.Log("\n" + text)
}

func withoutCost(l costLine) costLine {
	l.Cost = 0
	return l
}

func TestCostRefusesWhatItCannotDo(t *testing.T) {
	store, prefix := freshStore(t)
	_, emptyPrefix := freshStore(t)
	addr := testenv.RedisAddr()
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-a"}
	_, err := store.Record(context.Background(), ledger.Entry{Lease: "a#1", Day: "2026-10-15", Scope: sc, Tenant: "acme", Cost: 1})
	require.NoError(t, err)
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"help", []string{"-h"}, 0, "usage: tollgate cost [flags]"},
		{"bad flag", []string{"-bogus"}, 2, "flag provided but not defined: -bogus"},
		{"an argument", []string{"acme"}, 2, "unexpected argument"},
		{"a day that is not a date", []string{"-day", "yesterday"}, 2, `-day "yesterday" is not a date laid out as YYYY-MM-DD`},
		{"empty store", []string{"-redis", addr, "-prefix", emptyPrefix}, 1,
			"nothing in the cost ledger in Redis at \"" + addr + "\" under prefix \"" + emptyPrefix + "\": workers record calls"},
		{"empty day", []string{"-redis", addr, "-prefix", prefix, "-day", "2026-10-16"}, 1, "nothing in the cost ledger for day 2026-10-16 in Redis"},
		{"no such tenant", []string{"-redis", addr, "-prefix", prefix, "-tenant", "globex"}, 1, "nothing in the cost ledger for tenant globex in Redis"},
		{"bad address", []string{"-redis", "127.0.0.1:1"}, 1, "cannot reach Redis at \"127.0.0.1:1\""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			assert.Equal(t, tt.code, run(context.Background(), append([]string{"cost"}, tt.args...), &out, &errOut))
			assert.Contains(t, errOut.String(), tt.stderr)
			if tt.name == "help" {
				assert.True(t, strings.Contains(errOut.String(), "-tenant"), "the flags are listed")
			}
		})
	}
}

// TestCostAfterTheDemo is issue 17's acceptance test of the cost ledger: the
// sample's demo, scaled down, on a real dev server with its budget and
// ledger in Redis; then `tollgate cost -json` reports, per scope, exactly the
// tokens the fake provider recorded answering (input, cached or not, and
// output), and their cost at the sample's prices.
func TestCostAfterTheDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	srv := devserver.StartForTest(t)
	store, prefix := freshStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := ab.DemoOptions{Docs: 60, Questions: 6, Every: 300 * time.Millisecond, Store: store}
	r, err := ab.RunDemo(ctx, srv.Client(), o, io.Discard)
	require.NoError(t, err)
	require.Equal(t, ab.BatchResult{Classified: 60}, r.Batch)
	require.Positive(t, r.Answered, "questions asked while the batch ran")

	lines := costLines(t, "-redis", testenv.RedisAddr(), "-prefix", prefix)
	perScope := map[string]costLine{}
	workflows := map[string]int64{}
	for _, l := range lines {
		s := perScope[l.Scope]
		s.Calls += l.Calls
		s.Unpriced += l.Unpriced
		s.Tokens = s.Tokens.Add(l.Tokens)
		s.Cost += l.Cost
		perScope[l.Scope] = s
		workflows[l.WorkflowType] += l.Calls
	}
	scope := "openai/" + ab.Model + "/" + ab.Credential
	require.Len(t, perScope, 1, "one scope: %v", perScope)
	got := perScope[scope]
	assert.Equal(t, r.ProviderTokens.Input, got.Input+got.CachedInput, "input tokens: the ledger against the provider's record")
	assert.Equal(t, r.ProviderTokens.Output, got.Output, "output tokens")
	assert.Equal(t, int64(60+r.Answered), got.Calls, "one call per document and question")
	assert.Zero(t, got.Unpriced)
	assert.Equal(t, map[string]int64{"BatchClassifyWorkflow": 60, "AssistantWorkflow": int64(r.Answered)}, workflows)
	price := ab.Prices[spend.PriceKey(capacity.OpenAI, ab.Model)]
	want := (float64(got.Input)*price.Input + float64(got.CachedInput)*price.CachedInput + float64(got.Output)*price.Output) / 1e6
	assert.InDelta(t, want, got.Cost, 1e-9, "priced at the sample's prices")
	assert.True(t, r.LedgerMatches())
	t.Logf("provider record: input %d, output %d tokens; tollgate cost: %d calls, input %d (cached %d), output %d, $%.6f",
		r.ProviderTokens.Input, r.ProviderTokens.Output, got.Calls, got.Input+got.CachedInput, got.CachedInput, got.Output, got.Cost)
}

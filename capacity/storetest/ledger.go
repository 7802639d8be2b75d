package storetest

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/capacity/ledger"
)

// LedgerFactory returns a new, empty store that implements ledger.Ledger,
// whose time is clock.Now, sharing no state with earlier ones.
type LedgerFactory func(t *testing.T, clock capacity.Clock) ledger.Ledger

// RunLedger runs the ledger.Ledger contract against the stores newStore
// makes.
func RunLedger(t *testing.T, newStore LedgerFactory) {
	for _, tc := range ledgerCases {
		t.Run(tc.name, func(t *testing.T) {
			clock := capacitytest.NewManualClock(Epoch)
			tc.run(t, clock, newStore(t, clock))
		})
	}
}

var ledgerCases = []struct {
	name string
	run  func(t *testing.T, clock *capacitytest.ManualClock, l ledger.Ledger)
}{
	{"nothing recorded reads empty", ledgerEmpty},
	{"rows per day, scope, tenant and workflow type", ledgerRows},
	{"spend per tenant over scopes and per connection over models", ledgerSpent},
	{"a lease is recorded once", ledgerOncePerLease},
	{"concurrent records each count once", ledgerConcurrent},
	{"forgotten after Retention", ledgerForgotten},
	{"bad entries and days are refused", ledgerRefuses},
}

var (
	ledgerDay   = "2026-10-15"
	ledgerOA    = capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-a"}
	ledgerMini  = capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o-mini", Credential: "team-a"}
	ledgerOther = capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "claude-sonnet-4-5", Credential: "team-a"}
)

// entry returns an entry of lease n on day with the given tokens and cost.
func entry(n int, day string, sc capacity.Scope, tenant, wf string, in, cached, out int64, cost float64) ledger.Entry {
	return ledger.Entry{Lease: fmt.Sprintf("act-%06d#1", n), Day: day, Scope: sc, Tenant: tenant, WorkflowType: wf,
		Tokens: ledger.Tokens{Input: in, CachedInput: cached, Output: out}, Cost: cost}
}

func mustRecord(t *testing.T, l ledger.Ledger, e ledger.Entry) bool {
	t.Helper()
	ok, err := l.Record(context.Background(), e)
	require.NoError(t, err)
	return ok
}

func mustRows(t *testing.T, l ledger.Ledger, day string) []ledger.Row {
	t.Helper()
	rows, err := l.LedgerRows(context.Background(), day)
	require.NoError(t, err)
	return rows
}

func mustSpent(t *testing.T, l ledger.Ledger, day, tenant, conn string) ledger.Spend {
	t.Helper()
	s, err := l.Spent(context.Background(), day, tenant, conn)
	require.NoError(t, err)
	return s
}

func ledgerEmpty(t *testing.T, _ *capacitytest.ManualClock, l ledger.Ledger) {
	assert.Empty(t, mustRows(t, l, ""))
	assert.Empty(t, mustRows(t, l, ledgerDay))
	assert.Equal(t, ledger.Spend{}, mustSpent(t, l, ledgerDay, "acme", ledgerOA.CredentialKey()))
}

func ledgerRows(t *testing.T, _ *capacitytest.ManualClock, l ledger.Ledger) {
	next := "2026-10-16"
	require.True(t, mustRecord(t, l, entry(1, ledgerDay, ledgerOA, "acme", "Assistant", 1000, 200, 50, 0.0035)))
	require.True(t, mustRecord(t, l, entry(2, ledgerDay, ledgerOA, "acme", "Assistant", 500, 0, 25, 0.0015)))
	require.True(t, mustRecord(t, l, entry(3, ledgerDay, ledgerOA, "acme", "Batch", 10, 0, 1, 0.00002)))
	require.True(t, mustRecord(t, l, entry(4, ledgerDay, ledgerOA, "", "Batch", 7, 0, 3, 0.00001)))
	require.True(t, mustRecord(t, l, entry(5, ledgerDay, ledgerOther, "acme", "", 100, 900, 10, 0.0005)))
	unpriced := entry(6, ledgerDay, ledgerMini, "globex", "Assistant", 40, 0, 4, 0)
	unpriced.Unpriced = true
	require.True(t, mustRecord(t, l, unpriced))
	require.True(t, mustRecord(t, l, entry(7, next, ledgerOA, "acme", "Assistant", 1, 2, 3, 0.25)))

	rows := mustRows(t, l, ledgerDay)
	type key struct{ scope, tenant, wf string }
	var keys []key
	for _, r := range rows {
		assert.Equal(t, ledgerDay, r.Day)
		keys = append(keys, key{r.Scope.Key(), r.Tenant, r.WorkflowType})
	}
	assert.Equal(t, []key{
		{ledgerOther.Key(), "acme", ""},
		{ledgerMini.Key(), "globex", "Assistant"}, // "gpt-4o-mini/" sorts before "gpt-4o/"
		{ledgerOA.Key(), "", "Batch"},
		{ledgerOA.Key(), "acme", "Assistant"},
		{ledgerOA.Key(), "acme", "Batch"},
	}, keys, "sorted by scope key, tenant, workflow type")
	require.Len(t, rows, 5)
	acme := rows[3]
	assert.Equal(t, ledgerOA, acme.Scope)
	assert.Equal(t, int64(2), acme.Calls)
	assert.Zero(t, acme.Unpriced)
	assert.Equal(t, ledger.Tokens{Input: 1500, CachedInput: 200, Output: 75}, acme.Tokens)
	assert.InDelta(t, 0.005, acme.Cost, 1e-12)
	assert.Equal(t, ledger.Tokens{Input: 100, CachedInput: 900, Output: 10}, rows[0].Tokens)
	assert.Equal(t, int64(1), rows[1].Unpriced, "an unpriced call is counted")
	assert.Equal(t, ledger.Tokens{Input: 40, Output: 4}, rows[1].Tokens, "its tokens are kept")
	assert.Zero(t, rows[1].Cost)

	all := mustRows(t, l, "")
	require.Len(t, all, 6, "every day")
	assert.Equal(t, rows, all[:5])
	assert.Equal(t, next, all[5].Day)
	assert.InDelta(t, 0.25, all[5].Cost, 1e-12)
	assert.Empty(t, mustRows(t, l, "2026-10-14"))
}

func ledgerSpent(t *testing.T, _ *capacitytest.ManualClock, l ledger.Ledger) {
	teamB := ledgerOA
	teamB.Credential = "team-b"
	mustRecord(t, l, entry(1, ledgerDay, ledgerOA, "acme", "A", 1, 0, 1, 1.5))
	mustRecord(t, l, entry(2, ledgerDay, ledgerMini, "acme", "B", 1, 0, 1, 0.25))
	mustRecord(t, l, entry(3, ledgerDay, ledgerOther, "acme", "A", 1, 0, 1, 2))
	mustRecord(t, l, entry(4, ledgerDay, teamB, "globex", "A", 1, 0, 1, 4))
	mustRecord(t, l, entry(5, ledgerDay, ledgerOA, "", "A", 1, 0, 1, 0.125))
	mustRecord(t, l, entry(6, "2026-10-16", ledgerOA, "acme", "A", 1, 0, 1, 8))

	s := mustSpent(t, l, ledgerDay, "acme", ledgerOA.CredentialKey())
	assert.InDelta(t, 1.5+0.25+2, s.Tenant, 1e-12, "a tenant's spend is over every scope")
	assert.InDelta(t, 1.5+0.25+0.125, s.Connection, 1e-12, "a connection's spend is over the models of its credential, not another provider's")
	s = mustSpent(t, l, ledgerDay, "globex", teamB.CredentialKey())
	assert.InDelta(t, 4, s.Tenant, 1e-12)
	assert.InDelta(t, 4, s.Connection, 1e-12)
	s = mustSpent(t, l, ledgerDay, "", ledgerOther.CredentialKey())
	assert.InDelta(t, 0.125, s.Tenant, 1e-12, "the calls without a tenant")
	assert.InDelta(t, 2, s.Connection, 1e-12)
	s = mustSpent(t, l, "2026-10-16", "acme", ledgerOA.CredentialKey())
	assert.Equal(t, ledger.Spend{Tenant: 8, Connection: 8}, s, "per day")
	assert.Equal(t, ledger.Spend{}, mustSpent(t, l, ledgerDay, "initech", "openai/team-c"))
}

func ledgerOncePerLease(t *testing.T, clock *capacitytest.ManualClock, l ledger.Ledger) {
	e := entry(1, ledgerDay, ledgerOA, "acme", "A", 100, 0, 10, 0.5)
	require.True(t, mustRecord(t, l, e))
	clock.Advance(time.Minute)
	again := e
	again.Tokens.Output = 99 // a retried record, even with other figures
	assert.False(t, mustRecord(t, l, again), "a lease is recorded once")
	rows := mustRows(t, l, ledgerDay)
	require.Len(t, rows, 1)
	assert.Equal(t, int64(1), rows[0].Calls)
	assert.Equal(t, int64(10), rows[0].Output)
	assert.InDelta(t, 0.5, mustSpent(t, l, ledgerDay, "acme", ledgerOA.CredentialKey()).Tenant, 1e-12)

	// Another attempt of the same call is another lease: it is recorded.
	e2 := e
	e2.Lease = "act-000001#2"
	assert.True(t, mustRecord(t, l, e2))
	assert.Equal(t, int64(2), mustRows(t, l, ledgerDay)[0].Calls)

	clock.Advance(ledger.LeaseRetention - time.Minute - time.Second)
	assert.False(t, mustRecord(t, l, e), "remembered within ledger.LeaseRetention")
	clock.Advance(2 * time.Second)
	assert.True(t, mustRecord(t, l, e), "forgotten past ledger.LeaseRetention: it counts again")
	assert.Equal(t, int64(3), mustRows(t, l, ledgerDay)[0].Calls)
	other := e
	other.Lease, other.Day = "act-000002#1", "2026-10-16"
	assert.True(t, mustRecord(t, l, other))
	other.Lease = e.Lease
	assert.True(t, mustRecord(t, l, other), "a lease is recorded once per day")
}

func ledgerConcurrent(t *testing.T, _ *capacitytest.ManualClock, l ledger.Ledger) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	firsts := 0
	for w := range 8 {
		wg.Go(func() {
			for i := range 20 {
				n := w*20 + i
				if i%4 == 0 {
					n = i // the same 5 leases from every worker
				}
				ok, err := l.Record(context.Background(), entry(n, ledgerDay, ledgerOA, "acme", "A", 10, 1, 2, 0.25))
				assert.NoError(t, err)
				if ok {
					mu.Lock()
					firsts++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	// 8 workers × 15 distinct leases each, plus the 5 shared ones once.
	const want = 8*15 + 5
	assert.Equal(t, want, firsts, "Record says which call counted")
	rows := mustRows(t, l, ledgerDay)
	require.Len(t, rows, 1)
	assert.Equal(t, int64(want), rows[0].Calls)
	assert.Equal(t, ledger.Tokens{Input: 10 * want, CachedInput: want, Output: 2 * want}, rows[0].Tokens)
	assert.InDelta(t, 0.25*want, rows[0].Cost, 1e-9)
	assert.InDelta(t, 0.25*want, mustSpent(t, l, ledgerDay, "acme", ledgerOA.CredentialKey()).Connection, 1e-9)
}

func ledgerForgotten(t *testing.T, clock *capacitytest.ManualClock, l ledger.Ledger) {
	mustRecord(t, l, entry(1, ledgerDay, ledgerOA, "acme", "A", 1, 0, 1, 1))
	clock.Advance(ledger.Retention - time.Second)
	assert.Len(t, mustRows(t, l, ""), 1, "kept within ledger.Retention")
	assert.InDelta(t, 1, mustSpent(t, l, ledgerDay, "acme", ledgerOA.CredentialKey()).Tenant, 1e-12)
	clock.Advance(2 * time.Second)
	assert.Empty(t, mustRows(t, l, ""), "forgotten past ledger.Retention")
	assert.Empty(t, mustRows(t, l, ledgerDay))
	assert.Equal(t, ledger.Spend{}, mustSpent(t, l, ledgerDay, "acme", ledgerOA.CredentialKey()))
	assert.True(t, mustRecord(t, l, entry(1, ledgerDay, ledgerOA, "acme", "A", 5, 0, 5, 2)), "the lease is forgotten too")
	rows := mustRows(t, l, ledgerDay)
	require.Len(t, rows, 1)
	assert.Equal(t, int64(1), rows[0].Calls, "the day starts over")
	assert.InDelta(t, 2, rows[0].Cost, 1e-12)
}

func ledgerRefuses(t *testing.T, _ *capacitytest.ManualClock, l ledger.Ledger) {
	ctx := context.Background()
	good := entry(1, ledgerDay, ledgerOA, "acme", "A", 1, 0, 1, 1)
	for _, tc := range []struct {
		name string
		mod  func(e *ledger.Entry)
		want error
	}{
		{"no lease", func(e *ledger.Entry) { e.Lease = "" }, ledger.ErrInvalidEntry},
		{"no day", func(e *ledger.Entry) { e.Day = "" }, ledger.ErrInvalidEntry},
		{"a day that is not a date", func(e *ledger.Entry) { e.Day = "2026-13-01" }, ledger.ErrInvalidEntry},
		{"a key-shaped credential", func(e *ledger.Entry) { e.Scope.Credential = "sk-proj-4fQ9xZ2mB7kL1pW8rT3vY6nH0jD5sA" }, capacity.ErrKeyShapedName},
		{"a tenant with a space", func(e *ledger.Entry) { e.Tenant = "acme corp" }, ledger.ErrInvalidEntry},
		{"prompt text as workflow type", func(e *ledger.Entry) { e.WorkflowType = "Summarize this contract" }, ledger.ErrInvalidEntry},
		{"negative tokens", func(e *ledger.Entry) { e.Tokens.Output = -1 }, ledger.ErrInvalidEntry},
		{"NaN cost", func(e *ledger.Entry) { e.Cost = math.NaN() }, ledger.ErrInvalidEntry},
		{"negative cost", func(e *ledger.Entry) { e.Cost = -1 }, ledger.ErrInvalidEntry},
		{"unpriced with a cost", func(e *ledger.Entry) { e.Unpriced = true }, ledger.ErrInvalidEntry},
	} {
		e := good
		tc.mod(&e)
		_, err := l.Record(ctx, e)
		assert.ErrorIs(t, err, tc.want, tc.name)
	}
	_, err := l.Spent(ctx, "yesterday", "acme", ledgerOA.CredentialKey())
	assert.ErrorIs(t, err, ledger.ErrInvalidEntry)
	_, err = l.LedgerRows(ctx, "15/10/2026")
	assert.ErrorIs(t, err, ledger.ErrInvalidEntry)
	assert.Empty(t, mustRows(t, l, ""), "nothing refused was recorded")
}

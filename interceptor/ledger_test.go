package interceptor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/ledger"
	"github.com/tollgate-dev/tollgate/capacity/spend"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/interceptor"
)

// The scripted provider answers 90 prompt and 10 completion tokens; a test
// call reserves 11 input tokens and max_tokens 50.
var ledgerPrices = spend.Prices{"openai/gpt-4o": {Input: 2.5, CachedInput: 1.25, Output: 10}}

const (
	callCost  = (90*2.5 + 10*10) / 1e6 // what a call costs
	callWorst = (11*2.5 + 50*10) / 1e6 // its worst case
)

func withLedger(caps spend.Caps) func(*interceptor.Options) {
	return func(o *interceptor.Options) {
		o.Ledger = ledger.NewMemory(o.Clock)
		o.Prices = ledgerPrices
		o.SpendCaps = caps
	}
}

// TestLedgerRecordsSettledCalls: each answered call is recorded once, in
// its day, scope, tenant and workflow type, with the provider's tokens and
// their cost; a model without a price is recorded with its tokens and
// flagged.
func TestLedgerRecordsSettledCalls(t *testing.T) {
	e := newEnv(t, rpmLimits(600), withLedger(spend.Caps{}))
	o3 := named("", "acme")
	o3.Model = "o3"
	out := e.run(t, Step{In: named("", "acme")}, Step{In: named("", "acme")}, Step{In: named("", "beta")}, Step{In: o3})
	for i, o := range out {
		require.True(t, o.OK, "call %d", i)
	}
	day, _ := ledger.Day(e.Now(), capacity.DayBoundary{})
	rows, err := e.ledger.LedgerRows(context.Background(), day)
	require.NoError(t, err)
	require.Len(t, rows, 3)
	acme, beta, unpriced := rows[0], rows[1], rows[2]
	assert.Equal(t, gpt4o, acme.Scope)
	assert.Equal(t, "acme", acme.Tenant)
	assert.Equal(t, "StepsWorkflow", acme.WorkflowType)
	assert.Equal(t, int64(2), acme.Calls)
	assert.Equal(t, ledger.Tokens{Input: 180, Output: 20}, acme.Tokens)
	assert.InDelta(t, 2*callCost, acme.Cost, 1e-12)
	assert.Equal(t, "beta", beta.Tenant)
	assert.Equal(t, int64(1), beta.Calls)
	assert.Equal(t, "openai/o3/team-a", unpriced.Scope.Key())
	assert.Equal(t, int64(1), unpriced.Unpriced)
	assert.Equal(t, ledger.Tokens{Input: 90, Output: 10}, unpriced.Tokens)
	assert.Zero(t, unpriced.Cost)

	spent, err := e.ledger.Spent(context.Background(), day, "acme", gpt4o.CredentialKey())
	require.NoError(t, err)
	assert.InDelta(t, 2*callCost, spent.Tenant, 1e-12, "o3 costs nothing")
	assert.InDelta(t, 3*callCost, spent.Connection, 1e-12)
}

// TestLedgerSkipsCallsWithoutUsage: a call whose answer was lost, or that
// was never sent, is not in the ledger.
func TestLedgerSkipsCallsWithoutUsage(t *testing.T) {
	e := newEnv(t, rpmLimits(600), withLedger(spend.Caps{}), badKey())
	notSent := named("", "acme")
	notSent.NotSent = true
	out := e.run(t, Step{In: named("", "acme")}, Step{In: notSent})
	assert.False(t, out[0].OK, "refused credential")
	assert.False(t, out[1].OK)
	rows, err := e.ledger.LedgerRows(context.Background(), "")
	require.NoError(t, err)
	assert.Empty(t, rows)
}

// TestSpendCaps: a call whose worst case would pass its tenant's or its
// connection's cap for the day fails non-retryable with
// tollgate.QuotaExhausted, reason spend_cap, resetting at the day window's
// end, without reaching the provider; other tenants and connections go
// on; a model without a price is never refused.
func TestSpendCaps(t *testing.T) {
	// One call fits under 0.0008; after it (0.000325 spent) a second's
	// worst case (0.0005275) does not.
	const limit = 0.0008
	require.Less(t, callWorst, limit)
	require.Greater(t, callCost+callWorst, limit)
	onTeam := func(cred, key string) ChatInput {
		in := named("", key)
		in.Credential = cred
		return in
	}
	o3 := named("", "acme")
	o3.Model = "o3"
	for _, tt := range []struct {
		name  string
		caps  spend.Caps
		calls []ChatInput
		ok    []bool
		code  string
	}{
		{"a tenant's cap", spend.Caps{Tenants: map[string]float64{"acme": limit}},
			[]ChatInput{named("", "acme"), named("", "acme"), named("", "beta"), named("", "beta")}, []bool{true, false, true, true}, tgerrors.SpendCapTenant},
		{"the default tenant cap, with an exception", spend.Caps{Tenant: limit, Tenants: map[string]float64{"acme": 0}},
			[]ChatInput{named("", "acme"), named("", "acme"), named("", "beta"), named("", "beta"), named("", "")}, []bool{true, true, true, false, true}, tgerrors.SpendCapTenant},
		{"the calls without a tenant", spend.Caps{Tenants: map[string]float64{"": limit}},
			[]ChatInput{named("", ""), named("", ""), named("", "acme")}, []bool{true, false, true}, tgerrors.SpendCapTenant},
		{"a connection's cap", spend.Caps{Connections: map[string]float64{"openai/team-a": limit}},
			[]ChatInput{onTeam("team-a", "acme"), onTeam("team-a", "beta"), onTeam("team-b", "acme"), onTeam("team-b", "acme")}, []bool{true, false, true, true}, tgerrors.SpendCapConnection},
		{"an unpriced model", spend.Caps{Tenants: map[string]float64{"acme": limit}},
			[]ChatInput{o3, o3, o3}, []bool{true, true, true}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, rpmLimits(600), withLedger(tt.caps))
			var steps []Step
			for _, in := range tt.calls {
				steps = append(steps, Step{In: in})
			}
			out := e.run(t, steps...)
			sent := 0
			for i, o := range out {
				require.Equal(t, tt.ok[i], o.OK, "call %d: %+v", i, o)
				if o.OK {
					sent++
					continue
				}
				assert.Equal(t, tgerrors.TypeQuotaExhausted, o.Type)
				assert.True(t, o.NonRetryable)
				require.True(t, o.HasDetails)
				assert.Equal(t, tgerrors.ReasonSpendCap, o.Details.Reason)
				assert.Equal(t, tt.code, o.Details.Code)
				_, end := ledger.Day(o.Done, capacity.DayBoundary{})
				assert.True(t, o.Details.ResetAt.Equal(end), "resets at the day's end: %v, want %v", o.Details.ResetAt, end)
			}
			assert.Equal(t, int64(sent), e.provider.calls.Load(), "a refused call never reaches the provider")
			snap, err := e.store.Snapshot(context.Background(), gpt4o)
			require.NoError(t, err)
			assert.Empty(t, snap.Blocks, "the scope is not blocked")
			assert.Empty(t, snap.Leases)
		})
	}
}

// TestSpendCapResetsWithTheDay: past the end of the scope's day window
// (Limits.DayReset) the refused tenant spends again, and its calls land in
// the next day of the ledger.
func TestSpendCapResetsWithTheDay(t *testing.T) {
	var dayReset capacity.DayBoundary // set once the environment's clock is known
	e := newEnv(t, rpmLimits(600), func(o *interceptor.Options) {
		withLedger(spend.Caps{Tenants: map[string]float64{"acme": 0.0008}})(o)
		o.Limits = func(capacity.Scope) (capacity.Limits, bool) {
			l := rpmLimits(600)
			l.DayReset = dayReset
			return l, true
		}
	})
	start := e.Now()
	dayReset.Offset = (start.Sub(start.Truncate(24*time.Hour)) + 30*time.Minute) % (24 * time.Hour)
	first, end := ledger.Day(start, dayReset)
	require.Equal(t, 30*time.Minute, end.Sub(start).Round(time.Minute), "the window ends in 30 minutes")

	acme := named("", "acme")
	// The test environment does not move an attempt's start-to-close
	// deadline with the time it skips: give the late call room.
	out := e.run(t, Step{In: acme}, Step{In: acme}, Step{After: 40 * time.Minute, In: acme, StartToClose: 2 * time.Hour})
	assert.True(t, out[0].OK)
	assert.False(t, out[1].OK)
	assert.True(t, out[1].Details.ResetAt.Equal(end), "refused until the window's end")
	assert.True(t, out[2].OK, "a new day: %+v", out[2])

	rows, err := e.ledger.LedgerRows(context.Background(), "")
	require.NoError(t, err)
	require.Len(t, rows, 2)
	assert.Equal(t, first, rows[0].Day)
	assert.Equal(t, int64(1), rows[0].Calls)
	assert.Greater(t, rows[1].Day, first)
	assert.Equal(t, int64(1), rows[1].Calls)
}

func TestLedgerOptions(t *testing.T) {
	store, costs := capacity.NewMemoryStore(capacity.MemoryOptions{}), ledger.NewMemory(nil)
	limits := func(capacity.Scope) (capacity.Limits, bool) { return rpmLimits(60), true }
	caps := spend.Caps{Tenant: 1}
	for _, tt := range []struct {
		name string
		o    interceptor.Options
		ok   bool
	}{
		{"a ledger alone", interceptor.Options{Ledger: costs}, true},
		{"a ledger, prices and caps", interceptor.Options{Ledger: costs, Prices: ledgerPrices, SpendCaps: caps}, true},
		{"caps without a ledger", interceptor.Options{Prices: ledgerPrices, SpendCaps: caps}, false},
		{"caps without prices", interceptor.Options{Ledger: costs, SpendCaps: caps}, false},
		{"a bad price", interceptor.Options{Ledger: costs, Prices: spend.Prices{"gpt-4o": {Input: 1}}}, false},
		{"a bad cap", interceptor.Options{Ledger: costs, Prices: ledgerPrices, SpendCaps: spend.Caps{Tenant: -1}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Store, tt.o.Limits = store, limits
			_, err := interceptor.NewPlugin(tt.o)
			if tt.ok {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, interceptor.ErrInvalidOptions)
		})
	}
}

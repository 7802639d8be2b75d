package redisstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/ledger"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
)

// TestLedgerContract runs the ledger.Ledger contract against a real
// redis-server, on the suite's manual clock.
func TestLedgerContract(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	storetest.RunLedger(t, func(t *testing.T, clock capacity.Clock) ledger.Ledger {
		s, err := New(rdb, Options{Engine: EngineScripts, Prefix: testPrefix(t, rdb), Clock: clock})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// TestLedgerKeys: a day's keys share one hash tag, hold no secret and
// expire; a row's fields are named by scope key, tenant and workflow type.
func TestLedgerKeys(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	s, err := New(rdb, Options{Engine: EngineScripts, Prefix: prefix})
	require.NoError(t, err)
	ctx := context.Background()
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-a"}
	ok, err := s.Record(ctx, ledger.Entry{Lease: "act-1#1", Day: "2026-10-15", Scope: sc, Tenant: "acme", WorkflowType: "Assistant",
		Tokens: ledger.Tokens{Input: 10, CachedInput: 5, Output: 2}, Cost: 0.5})
	require.NoError(t, err)
	require.True(t, ok)

	tag := "{" + prefix + ":ledger:2026-10-15}"
	for _, k := range []string{tag + ":rows", tag + ":tenants", tag + ":conns", tag + ":lease:act-1#1"} {
		ttl, err := rdb.PTTL(ctx, k).Result()
		require.NoError(t, err, k)
		require.Positive(t, ttl, "%s expires", k)
	}
	rows, err := rdb.HGetAll(ctx, tag+":rows").Result()
	require.NoError(t, err)
	require.Equal(t, "10", rows["openai/gpt-4o/team-a|acme|Assistant|in"])
	require.Equal(t, "5", rows["openai/gpt-4o/team-a|acme|Assistant|cin"])
	require.Equal(t, "0.5", rows["openai/gpt-4o/team-a|acme|Assistant|cost"])
	v, err := rdb.HGet(ctx, tag+":conns", "openai/team-a").Result()
	require.NoError(t, err)
	require.Equal(t, "0.5", v)
	v, err = rdb.HGet(ctx, tag+":tenants", "acme").Result()
	require.NoError(t, err)
	require.Equal(t, "0.5", v)

	// A field the reader does not know is ignored; a bad number is an error.
	require.NoError(t, rdb.HSet(ctx, tag+":rows", "openai/gpt-4o/team-a|acme|Assistant|later", "x").Err())
	_, err = s.LedgerRows(ctx, "2026-10-15")
	require.NoError(t, err)
	require.NoError(t, rdb.HSet(ctx, tag+":rows", "openai/gpt-4o/team-a|acme|Assistant|out", "-3").Err())
	_, err = s.LedgerRows(ctx, "2026-10-15")
	require.ErrorIs(t, err, ErrBadReply)
}

package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

// TestTicketDueAcrossWorkers: a refund settled by one worker brings a
// ticket booked through another due, and that worker's waiter hears of it
// at once (TicketDue), not at the ticket's old time.
func TestTicketDueAcrossWorkers(t *testing.T) {
	settler, _ := newTestStore(t, Options{})
	waiter, err := New(testClient(t), Options{Prefix: settler.opts.Prefix})
	require.NoError(t, err)
	t.Cleanup(func() { waiter.Close() })
	ctx := context.Background()
	sc := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "m", Credential: "due"}
	l := capacity.Limits{OutputTokensPerMinute: 6000, Burst: 10 * time.Second, SafetyMargin: 1} // 100/s, capacity 1000
	charges := func(out int64) capacity.Charges {
		return capacity.Charges{capacity.OutputTokens: out, capacity.InFlight: 1}
	}
	held, err := settler.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: "a", Attempt: 1, Charges: charges(1000)})
	require.NoError(t, err)
	require.True(t, held.Granted)

	req := capacity.Request{Scope: sc, Limits: l, Call: "b", Attempt: 1, Charges: charges(800), Book: true}
	due, stop := waiter.TicketDue(sc, req.Call)
	defer stop()
	res, err := waiter.Reserve(ctx, req)
	require.NoError(t, err)
	require.True(t, res.Booked)
	require.Greater(t, res.RetryAt.Sub(res.Now), 7*time.Second)
	time.Sleep(100 * time.Millisecond) // the subscription is made in the background

	require.NoError(t, settler.Settle(ctx, held.Lease, charges(100)))
	select {
	case <-due:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not hear that its ticket came due")
	}
	res, err = waiter.Reserve(ctx, req)
	require.NoError(t, err)
	require.True(t, res.Granted, "claimed at once: %+v", res)
}

package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
)

// TestTicketDueAcrossWorkers: a refund settled by one worker brings a
// ticket booked through another forward, and that worker's waiter hears of
// it at once (TicketDue), not at the ticket's old time, when the move is
// more than tuning.AnnounceMove and a quarter of the wait left — as the
// memory store announces (capacity's TestWaitAnnouncedMoves). Output
// tokens refill at 200 a second (5 ms a token) into a bucket of 2000 that
// a holds whole; the clock stands still.
func TestTicketDueAcrossWorkers(t *testing.T) {
	for _, tc := range []struct {
		name          string
		booked        int64 // b's charge: due booked/200 s after a's grant
		refund        int64 // what a's settle gives back
		wantAnnounced bool
	}{
		{"a refund that makes the ticket due now", 1600, 1600, true},
		{"a short move near the end", 60, 40, true},
		{"a move within AnnounceMove", 60, 1, false},
		{"a move within a quarter of the wait left", 1600, 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := capacitytest.NewManualClock(storetest.Epoch)
			settler, _ := newTestStore(t, Options{Engine: EngineScripts, Clock: clock})
			waiter, err := New(testClient(t), Options{Engine: EngineScripts, Prefix: settler.opts.Prefix, Clock: clock})
			require.NoError(t, err)
			t.Cleanup(func() { waiter.Close() })
			ctx := context.Background()
			sc := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "m", Credential: "due"}
			l := capacity.Limits{OutputTokensPerMinute: 12000, Burst: 10 * time.Second, SafetyMargin: 1}
			charges := func(out int64) capacity.Charges {
				return capacity.Charges{capacity.OutputTokens: out, capacity.InFlight: 1}
			}
			held, err := settler.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: "a", Attempt: 1, Charges: charges(2000)})
			require.NoError(t, err)
			require.True(t, held.Granted)

			req := capacity.Request{Scope: sc, Limits: l, Call: "b", Attempt: 1, Charges: charges(tc.booked), Book: true}
			due, stop := waiter.TicketDue(sc, req.Call)
			defer stop()
			res, err := waiter.Reserve(ctx, req)
			require.NoError(t, err)
			require.True(t, res.Booked)
			require.Equal(t, time.Duration(tc.booked)*5*time.Millisecond, res.RetryAt.Sub(res.Now))
			time.Sleep(100 * time.Millisecond) // the subscription is made in the background

			require.NoError(t, settler.Settle(ctx, held.Lease, charges(2000-tc.refund)))
			if !tc.wantAnnounced {
				select {
				case <-due:
					t.Fatal("a move this small was announced")
				case <-time.After(300 * time.Millisecond):
				}
				return
			}
			select {
			case <-due:
			case <-time.After(5 * time.Second):
				t.Fatal("the waiter did not hear that its ticket moved forward")
			}
			if tc.refund == tc.booked {
				res, err = waiter.Reserve(ctx, req)
				require.NoError(t, err)
				require.True(t, res.Granted, "claimed at once: %+v", res)
			}
		})
	}
}

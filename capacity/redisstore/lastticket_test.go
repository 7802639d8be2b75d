package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// TestLastTicketAmongTheLatest: a call larger than the unbooked part of a
// bucket waits at least until the last ticket that charges the bucket is
// due, looked for among the latest tuning.LastTicketScan tickets only (no
// script reads the queue ticket by ticket). Here a chat call's ticket
// charges output tokens and n embeddings booked behind it charge none: past
// the scan, a call needing output tokens is told the time of the last
// ticket looked at, no earlier than the chat call's, in both stores alike.
func TestLastTicketAmongTheLatest(t *testing.T) {
	t.Parallel()
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		clock := capacitytest.NewManualClock(storetest.Epoch)
		rs, err := New(rdb, Options{Engine: EngineScripts, Prefix: fmt.Sprintf("%s:%d", prefix, run), Clock: clock})
		require.NoError(rt, err)
		defer func() { _ = rs.Close() }()
		m := &diffModel{
			clock: clock, mem: capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock}), rs: rs,
			memL: map[string]capacity.Lease{}, rsL: map[string]capacity.Lease{},
			booked: map[string]capacity.Request{}, bookedAt: map[string]time.Time{},
			limits: capacity.Limits{InputTokensPerMinute: 6000, OutputTokensPerMinute: 600}, // 475 and 47.5 at once
		}
		request := func(call string, in, out int64, book bool) capacity.Request {
			return capacity.Request{Scope: diffScope, Limits: m.limits, Call: call, Attempt: 1, Book: book,
				Charges: capacity.Charges{capacity.InputTokens: in, capacity.OutputTokens: out}}
		}
		m.send(rt, request("first", 10, 40, true))                                                   // granted: 7.5 output tokens left
		m.send(rt, request("chat", 10, 40, true))                                                    // booked on output tokens
		n := rapid.IntRange(tuning.LastTicketScan-8, 2*tuning.LastTicketScan).Draw(rt, "embeddings") // a few granted, the rest booked
		for i := range n {
			m.send(rt, request(fmt.Sprint("embed-", i), 100, 0, true)) // booked on input tokens
		}
		m.compare(rt)
		snap, err := m.mem.Snapshot(context.Background(), diffScope)
		require.NoError(rt, err)
		m.send(rt, request("output-only", 0, 40, false))
		if tickets := snap.Tickets; len(tickets) > tuning.LastTicketScan { // by time, then by call
			// The chat call's ticket is further back than the scan: the
			// last ticket looked at is the scan's length from the latest.
			scanned := tickets[len(tickets)-tuning.LastTicketScan]
			require.False(rt, m.retryAt.Before(scanned.At), "told %v, before %s's ticket at %v", m.retryAt, scanned.Call, scanned.At)
		}
	})
	deleteKeys(t, rdb, prefix)
}

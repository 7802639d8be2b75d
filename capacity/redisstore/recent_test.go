package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// TestRecentGrantGroups: what a grant's mark says the calls granted within
// tuning.ReorderWindow before it hold in flight (Mark.InFlight) is the
// memory store's, through every place scripts 6.1 keep a group of recent
// grants (lua/state.lua, index.recent*): the latest two groups in the
// state, two grants at one time in one group, an earlier group moved to the
// hash while its leases live, a lease ending in a group of the hash, groups leaving
// the window while a later one stays (read from the hash) and every group
// leaving at once (read from nowhere).
func TestRecentGrantGroups(t *testing.T) {
	start := time.Now().Truncate(time.Second)
	redisClock, memClock := capacitytest.NewManualClock(start), capacitytest.NewManualClock(start)
	rs, _ := newTestStore(t, Options{Engine: EngineScripts, Clock: redisClock})
	ms := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: memClock})
	ctx := context.Background()
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "m", Credential: "recent"}
	l := capacity.Limits{RequestsPerMinute: 600_000, MaxInFlight: 100, SafetyMargin: 1}
	one := capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}
	w := tuning.ReorderWindow
	leases := map[string][2]capacity.Lease{}

	at := func(d time.Duration) {
		redisClock.Set(start.Add(d))
		memClock.Set(start.Add(d))
	}
	grant := func(call string, wantInFlight float64) {
		t.Helper()
		var got [2]capacity.Lease
		for i, s := range []capacity.Store{rs, ms} {
			res, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: call, Attempt: 1, Charges: one})
			require.NoError(t, err)
			require.True(t, res.Granted, "%s: %+v", call, res)
			got[i] = res.Lease
		}
		leases[call] = got
		require.Equal(t, got[1].Mark.InFlight, got[0].Mark.InFlight, "%s: the Redis store's mark, then the memory store's", call)
		require.Equal(t, wantInFlight, got[0].Mark.InFlight[capacity.Requests], "%s", call)
	}
	settle := func(call string) {
		t.Helper()
		for i, s := range []capacity.Store{rs, ms} {
			require.NoError(t, s.Settle(ctx, leases[call][i], one))
		}
	}

	at(0)
	grant("a", 0)
	grant("b", 1) // the same time: a's group, in the state
	at(10 * time.Millisecond)
	grant("c", 2) // a new group: a and b's is the one before it, in the state
	at(20 * time.Millisecond)
	grant("d", 3) // a and b's group goes to the hash
	at(30 * time.Millisecond)
	settle("b") // in a group of the hash
	settle("c") // in the group before the latest
	at(w + 15*time.Millisecond)
	grant("e", 1) // a's and c's groups leave, d's stays: a's is read from the hash
	at(w + 25*time.Millisecond)
	grant("f", 1) // d's leaves; e's, the latest but one, stays
	at(2*w + 100*time.Millisecond)
	grant("g", 0) // every group leaves at once
	settle("g")
	at(2*w + 100*time.Millisecond)
	grant("h", 0) // g ended in the latest group, in the state
}

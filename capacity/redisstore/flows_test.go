package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// TestIdleFlowsForgottenAFewAtATime: past tuning.MaxIdleFlows flows, each
// placement looks at a few flows and forgets the idle ones among them
// (lua/rules.lua and capacity/memfair.go, forgetIdleFlows), in both
// stores: a scope whose tenants all went quiet forgets them as another
// tenant's calls move its rank's virtual time past them, and keeps the
// flows still ahead of it.
func TestIdleFlowsForgottenAFewAtATime(t *testing.T) {
	clock := capacitytest.NewManualClock(time.Now().Truncate(time.Second))
	rs, _ := newTestStore(t, Options{Engine: EngineScripts, Clock: clock})
	ms := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
	ctx := context.Background()
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "m", Credential: "flows"}
	l := capacity.Limits{RequestsPerMinute: 600_000_000, SafetyMargin: 1}
	tenants := tuning.MaxIdleFlows + 100
	call := func(s capacity.Store, key string, i int, tokens int64) {
		t.Helper()
		res, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: fmt.Sprint(key, "-", i), Attempt: 1,
			Charges: capacity.Charges{capacity.Requests: 1, capacity.Tokens: tokens}, Fairness: capacity.Fairness{Key: key}})
		require.NoError(t, err)
		require.True(t, res.Granted, "%s-%d: %+v", key, i, res)
		require.NoError(t, s.Settle(ctx, res.Lease, res.Lease.Charges))
	}
	flows := func(s capacity.Store) []capacity.Flow {
		snap, err := s.Snapshot(ctx, sc)
		require.NoError(t, err)
		return snap.Flows
	}
	for name, s := range map[string]capacity.Store{"redis": rs, "memory": ms} {
		t.Run(name, func(t *testing.T) {
			// A call each, then a tenant whose calls cost more: "ahead" is
			// ahead of the rank's virtual time the whole time.
			for i := range tenants {
				call(s, fmt.Sprint("tenant-", i), 0, 10)
			}
			require.Len(t, flows(s), tenants, "every flow kept while none is idle")
			call(s, "ahead", 0, 1_000_000)
			// One busy tenant: each call starts where its last finished,
			// and serving it moves the virtual time past the quiet ones.
			for i := range 2 * tenants / tuning.ForgetFlowsScan {
				call(s, "busy", i, 10)
			}
			kept := map[string]bool{}
			for _, f := range flows(s) {
				kept[f.Key] = true
			}
			require.True(t, kept["busy"] && kept["ahead"], "the flows ahead of the virtual time stay: %v", kept)
			require.Less(t, len(kept), tuning.MaxIdleFlows, "the idle flows are forgotten: %d left", len(kept))
		})
	}
}

package storetest

import (
	"context"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

func remaining(d capacity.Dimension, n int64) capacity.Observation {
	var o capacity.Observation
	o.Dims[d] = capacity.DimensionObservation{HasRemaining: true, Remaining: n}
	return o
}

var observeCases = []Case{
	{"ObservedRemainingLowersLevel", func(h *harness) {
		l := capacity.Limits{TokensPerMinute: 60000, SafetyMargin: 1, Burst: 5 * time.Second} // capacity 5000
		le := h.grant(h.req(l, tokens(500, 500)))
		h.grant(h.req(l, tokens(300, 0))) // granted after le left
		o := remaining(capacity.Tokens, 2000)
		o.Mark = le.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		// The provider has at most 2000 (at least 1700, had it not counted
		// the call granted after le yet): the level is lowered to 2000.
		assert.InDelta(h.t, 2000, h.level(capacity.Tokens), 1e-9)
		// A remaining that does not say of which budget (no limit) never
		// raises the level.
		o = remaining(capacity.Tokens, 100000)
		o.Mark = le.Mark
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 2000, h.level(capacity.Tokens), 1e-9)
	}},
	{"ObservedLowerLimitLowersBudget", func(h *harness) {
		l := capacity.Limits{RequestsPerMinute: 600, SafetyMargin: 1, Burst: 5 * time.Second}
		var o capacity.Observation
		o.Dims[capacity.Requests] = capacity.DimensionObservation{HasLimit: true, Limit: 60, HasReset: true, ResetIn: time.Hour}
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		h.grant(h.req(l, one())) // installs limits; the lowering holds
		s := h.snap(testScope)
		assert.InDelta(h.t, 1, s.Budget[capacity.Requests].Rate, 1e-9, "rate from the limit, never from reset")
		assert.InDelta(h.t, 5, s.Budget[capacity.Requests].Capacity, 1e-9)
		assert.LessOrEqual(h.t, s.Level[capacity.Requests], 5.0)
		o.Dims[capacity.Requests] = capacity.DimensionObservation{HasLimit: true, Limit: 600}
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, o))
		assert.InDelta(h.t, 10, h.snap(testScope).Budget[capacity.Requests].Rate, 1e-9, "restored")
	}},
	{"EmptyObservationChangesNothing", func(h *harness) {
		l := rpm(60)
		h.grant(h.req(l, one()))
		before := h.snap(testScope).Level
		require.NoError(h.t, h.store.Observe(h.ctx, testScope, capacity.Observation{}))
		assert.Equal(h.t, before, h.snap(testScope).Level)
	}},
}

var blockCases = []Case{
	{"ScopeBlock", func(h *harness) {
		l := rpm(60)
		until := h.clock.Now().Add(3 * time.Second)
		require.NoError(h.t, h.store.Block(h.ctx, testScope, capacity.Block{Reason: capacity.Cooldown, Until: until}))
		res := h.deny(h.req(l, one()))
		assert.Equal(h.t, capacity.DenyBlocked, res.Reason)
		assert.Equal(h.t, capacity.Cooldown, res.Block.Reason)
		assert.True(h.t, res.RetryAt.Equal(until))
		require.NoError(h.t, h.store.Block(h.ctx, testScope, capacity.Block{Reason: capacity.Cooldown, Until: h.clock.Now().Add(time.Second)}))
		assert.True(h.t, h.deny(h.req(l, one())).RetryAt.Equal(until), "a shorter block never shortens")
		assert.Len(h.t, h.snap(testScope).Blocks, 1)
		h.clock.Set(until)
		h.grant(h.req(l, one()))
	}},
	{"CredentialBlockCoversSiblingScopes", func(h *harness) {
		l := rpm(60)
		sibling := testScope
		sibling.LimitGroup = "gpt-4o-mini"
		other := testScope
		other.Credential = "team-b"
		until := h.clock.Now().Add(time.Minute)
		require.NoError(h.t, h.store.Block(h.ctx, testScope, capacity.Block{Reason: capacity.CredentialDisabled, Until: until, Credential: true}))
		r := h.req(l, one())
		r.Scope = sibling
		res := h.deny(r)
		assert.Equal(h.t, capacity.CredentialDisabled, res.Block.Reason)
		r = h.req(l, one())
		r.Scope = other
		h.grant(r)
		h.clock.Set(until)
		r = h.req(l, one())
		r.Scope = sibling
		h.grant(r)
	}},
}

var halfOpenCases = []Case{
	{"HalfOpenBlockLetsOneProbeThrough", func(h *harness) {
		l := rpm(60)
		sibling := testScope
		sibling.LimitGroup = "gpt-4o-mini"
		until := h.clock.Now().Add(time.Minute)
		require.NoError(h.t, h.store.Block(h.ctx, testScope, capacity.Block{Reason: capacity.CredentialDisabled, Until: until, Credential: true, HalfOpen: 10 * time.Second}))
		h.deny(h.req(l, one()))
		h.clock.Set(until)
		r := h.req(l, one())
		r.Scope = sibling
		res := h.reserve(r)
		require.True(h.t, res.Granted)
		assert.True(h.t, res.Probe, "the first call after the block is the probe")
		res = h.deny(h.req(l, one()))
		assert.Equal(h.t, capacity.DenyBlocked, res.Reason, "others wait for the probe")
		assert.True(h.t, res.Block.Probing)
		assert.True(h.t, res.RetryAt.Equal(until.Add(10*time.Second)))
		// The probe failed: block again; then a later probe succeeds.
		require.NoError(h.t, h.store.Block(h.ctx, testScope, capacity.Block{Reason: capacity.CredentialDisabled, Until: h.clock.Now().Add(time.Minute), Credential: true, HalfOpen: 10 * time.Second}))
		h.clock.Advance(time.Minute)
		res = h.reserve(h.req(l, one()))
		require.True(h.t, res.Granted)
		require.True(h.t, res.Probe)
		require.NoError(h.t, h.store.Unblock(h.ctx, testScope, true))
		res = h.reserve(h.req(l, one()))
		assert.True(h.t, res.Granted)
		assert.False(h.t, res.Probe)
	}},
	{"DeniedProbeIsGivenBack", func(h *harness) {
		l := rpm(60)
		for range 5 {
			h.grant(h.req(l, one()))
		}
		until := h.clock.Now().Add(500 * time.Millisecond)
		require.NoError(h.t, h.store.Block(h.ctx, testScope, capacity.Block{Reason: capacity.Overloaded, Until: until, HalfOpen: 30 * time.Second}))
		h.clock.Set(until.Add(-time.Millisecond))
		h.deny(h.req(l, one()))
		h.clock.Set(until)
		res := h.deny(h.req(l, one()))
		assert.Equal(h.t, capacity.DenyCapacity, res.Reason, "no room yet: the probe is not spent")
		h.clock.Advance(500 * time.Millisecond)
		res = h.reserve(h.req(l, one()))
		require.True(h.t, res.Granted)
		assert.True(h.t, res.Probe)
		require.NoError(h.t, h.store.Unblock(h.ctx, testScope, false))
		h.clock.Advance(time.Second)
		assert.False(h.t, h.reserve(h.req(l, one())).Probe)
	}},
}

var inputCases = []Case{
	{"InvalidRequests", func(h *harness) {
		good := h.req(rpm(60), one())
		for _, tc := range []struct {
			name string
			mod  func(r *capacity.Request)
			want error
		}{
			{"no call", func(r *capacity.Request) { r.Call = "" }, capacity.ErrInvalidRequest},
			{"attempt 0", func(r *capacity.Request) { r.Attempt = 0 }, capacity.ErrInvalidRequest},
			{"negative charge", func(r *capacity.Request) { r.Charges[capacity.Tokens] = -1 }, capacity.ErrInvalidRequest},
			{"negative limit", func(r *capacity.Request) { r.Limits.TokensPerMinute = -5 }, capacity.ErrInvalidLimits},
			{"margin over 1", func(r *capacity.Request) { r.Limits.SafetyMargin = 1.5 }, capacity.ErrInvalidLimits},
			{"no provider", func(r *capacity.Request) { r.Scope.Provider = "" }, capacity.ErrInvalidScope},
			{"secret credential", func(r *capacity.Request) { r.Scope.Credential = "sk-proj-abcdef" }, capacity.ErrInvalidScope},
		} {
			r := good
			tc.mod(&r)
			_, err := h.store.Reserve(h.ctx, r)
			assert.ErrorIs(h.t, err, tc.want, tc.name)
		}
		h.grant(good)
	}},
	{"CanceledContext", func(h *harness) {
		ctx, cancel := context.WithCancel(h.ctx)
		cancel()
		_, err := h.store.Reserve(ctx, h.req(rpm(60), one()))
		assert.Error(h.t, err)
	}},
	{"FailureCountsExpire", func(h *harness) {
		for want := 1; want <= 3; want++ {
			n, err := h.store.AddFailure(h.ctx, testScope, "call-x", time.Minute)
			require.NoError(h.t, err)
			assert.Equal(h.t, want, n)
		}
		n, err := h.store.AddFailure(h.ctx, testScope, "call-y", time.Minute)
		require.NoError(h.t, err)
		assert.Equal(h.t, 1, n, "counts are per call")
		h.clock.Advance(time.Minute)
		n, err = h.store.AddFailure(h.ctx, testScope, "call-x", time.Minute)
		require.NoError(h.t, err)
		assert.Equal(h.t, 1, n, "forgotten ttl after the last failure")
		_, err = h.store.AddFailure(h.ctx, testScope, "", time.Minute)
		assert.ErrorIs(h.t, err, capacity.ErrInvalidRequest)
	}},
	{"SnapshotOfUnknownScope", func(h *harness) {
		s := h.snap(capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "none", Credential: "x"})
		assert.Empty(h.t, s.Leases)
	}},
	{"NotifierWakesOnRelease", func(h *harness) {
		n, ok := h.store.(capacity.Notifier)
		if !ok {
			h.t.Skip("store is not a Notifier")
		}
		le := h.grant(h.req(rpm(60), one()))
		ch, stop := n.Released(testScope)
		defer stop()
		require.NoError(h.t, h.store.Settle(h.ctx, le, le.Charges))
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			h.t.Fatal("no release notification")
		}
	}},
	{"WaitSleepsUntilRetryAt", func(h *harness) {
		l := rpm(60)
		for range 5 {
			h.grant(h.req(l, one()))
		}
		r := h.req(l, one())
		r.Book = true
		done := make(chan capacity.Reservation, 1)
		go func() {
			res, err := capacity.Wait(h.ctx, h.store, r, capacity.WaitOptions{Clock: h.clock, MaxWait: 10 * time.Second})
			assert.NoError(h.t, err)
			done <- res
		}()
		require.Eventually(h.t, func() bool { return h.clock.Waiters() == 1 }, 10*time.Second, time.Millisecond, "Wait never slept")
		h.clock.Advance(time.Second)
		select {
		case res := <-done:
			assert.True(h.t, res.Granted)
		case <-time.After(10 * time.Second):
			h.t.Fatal("Wait did not return after its time")
		}
	}},
	{"WaitGivesUpBeyondMaxWait", func(h *harness) {
		l := rpm(6) // 0.1/s: the next slot is 10 s away
		h.grant(h.req(l, one()))
		res, err := capacity.Wait(h.ctx, h.store, h.req(l, one()), capacity.WaitOptions{Clock: h.clock, MaxWait: 5 * time.Second})
		require.NoError(h.t, err)
		assert.False(h.t, res.Granted)
		assert.Equal(h.t, 10*time.Second, res.RetryAt.Sub(res.Now))
	}},
}

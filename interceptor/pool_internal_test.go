package interceptor

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/accounting"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
)

// poolRig is a pool of three keys on a memory store at a fixed instant.
// Each key's bucket holds 5 requests and refills one a second.
type poolRig struct {
	t     *testing.T
	t0    time.Time
	store *capacity.MemoryStore
	opts  Options
	n     int // calls made by fill and book
}

var poolLimits = capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1, Burst: 5 * time.Second}

func newPoolRig(t *testing.T) *poolRig {
	t0 := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	clock := capacitytest.NewManualClock(t0)
	store := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
	o, err := Options{
		Store:  store,
		Limits: func(capacity.Scope) (capacity.Limits, bool) { return poolLimits, true },
		Pools:  map[string][]string{"pool": {"key-1", "key-2", "key-3"}},
		Clock:  clock,
		Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	}.withDefaults()
	require.NoError(t, err)
	return &poolRig{t: t, t0: t0, store: store, opts: o}
}

// scope is key's scope for the pool's model; model "other" is another
// model on the same key.
func (r *poolRig) scope(key string) capacity.Scope {
	return capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: key}
}

// call is a gated call of one request on the pool, as attempt 1 of "act-x".
func (r *poolRig) call(ties []float64) *gatedCall {
	r.t.Helper()
	o := r.opts
	i := 0
	o.Rand = func() float64 {
		if i >= len(ties) {
			return 0.5
		}
		i++
		return ties[i-1]
	}
	call := Call{Provider: capacity.OpenAI, Model: "gpt-4o", Credential: "pool", Demand: capacity.Demand{InputTokens: 10, MaxTokens: 10}}
	g := &gatedCall{opts: &o, info: activity.Info{Attempt: 1}, id: "act-x", call: call, profile: accounting.OpenAIProfile{}, demand: call.Demand}
	g.charges = g.profile.Charges(g.demand)
	g.scope = capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "pool"}
	var err error
	g.pool, err = newPoolCall(&o, call, "pool", g.scope, g.profile)
	require.NoError(r.t, err)
	return g
}

// fill grants n one-request calls on key.
func (r *poolRig) fill(key string, n int) {
	r.t.Helper()
	for range n {
		res := r.reserve(key, "other-"+strconv.Itoa(r.n), false)
		require.True(r.t, res.Granted)
	}
}

// book books n tickets of one request on key (its bucket is empty).
func (r *poolRig) book(key string, n int) {
	r.t.Helper()
	for range n {
		res := r.reserve(key, "other-"+strconv.Itoa(r.n), true)
		require.True(r.t, res.Booked)
	}
}

func (r *poolRig) reserve(key, call string, book bool) capacity.Reservation {
	r.t.Helper()
	r.n++
	var c capacity.Charges
	c[capacity.Requests] = 1
	res, err := r.store.Reserve(context.Background(), capacity.Request{Scope: r.scope(key), Limits: poolLimits, Call: call, Attempt: 1, Charges: c, Book: book})
	require.NoError(r.t, err)
	return res
}

func (r *poolRig) block(key string, b capacity.Block) {
	r.t.Helper()
	sc := r.scope(key)
	if b.Credential {
		sc.LimitGroup = "other" // a credential-wide block, heard on another model
	}
	require.NoError(r.t, r.store.Block(context.Background(), sc, b))
}

func revoked(until time.Time) capacity.Block {
	return capacity.Block{Reason: capacity.CredentialDisabled, Credential: true, Until: until, HalfOpen: 30 * time.Second, Detail: "invalid_api_key"}
}

// TestPoolChoice: which key of a pool a call goes on, from the shared
// store alone: room now before a wait, the least used among those with
// room, the shortest wait when none has room; keys out (refused, no
// access, out of quota) are skipped, and with every key out the call fails
// with a typed error naming each.
func TestPoolChoice(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setup    func(r *poolRig)
		ties     []float64 // Options.Rand, per member in order
		deadline time.Duration
		want     string // the member chosen; "" for an error
		granted  bool
		check    func(t *testing.T, r *poolRig, err error)
	}{
		{name: "all free: the least used", setup: func(r *poolRig) {
			r.fill("key-1", 2)
			r.fill("key-2", 1)
			r.fill("key-3", 3)
		}, want: "key-2", granted: true},
		{name: "all unused: at random", setup: func(*poolRig) {}, ties: []float64{0.7, 0.9, 0.1}, want: "key-3", granted: true},
		{name: "one cooling: the others", setup: func(r *poolRig) {
			r.block("key-1", capacity.Block{Reason: capacity.Cooldown, Until: r.t0.Add(3 * time.Second)})
			r.fill("key-2", 2)
			r.fill("key-3", 1)
		}, want: "key-3", granted: true},
		{name: "one revoked: skipped", setup: func(r *poolRig) {
			r.block("key-1", revoked(r.t0.Add(time.Minute)))
			r.fill("key-2", 1)
			r.fill("key-3", 2)
		}, want: "key-2", granted: true},
		{name: "one unpaid: skipped", setup: func(r *poolRig) {
			r.block("key-2", capacity.Block{Reason: capacity.QuotaExhausted, Credential: true, Until: r.t0.Add(time.Hour), Detail: "insufficient_quota"})
			r.fill("key-1", 4)
			r.fill("key-3", 3)
		}, want: "key-3", granted: true},
		{name: "none has room: the shortest wait", setup: func(r *poolRig) {
			r.fill("key-1", 5)
			r.book("key-1", 2)
			r.fill("key-2", 5)
			r.fill("key-3", 5)
			r.book("key-3", 1)
		}, want: "key-2"},
		{name: "all cooling: the first back", setup: func(r *poolRig) {
			r.block("key-1", capacity.Block{Reason: capacity.Cooldown, Until: r.t0.Add(5 * time.Second)})
			r.block("key-2", capacity.Block{Reason: capacity.Cooldown, Until: r.t0.Add(2 * time.Second)})
			r.block("key-3", capacity.Block{Reason: capacity.Overloaded, Until: r.t0.Add(9 * time.Second)})
		}, want: "key-2"},
		{name: "a ticket keeps its place", setup: func(r *poolRig) {
			r.fill("key-3", 5)
			require.True(r.t, r.reserve("key-3", "act-x", true).Booked)
		}, want: "key-3", check: func(t *testing.T, r *poolRig, _ error) {
			snap, err := r.store.Snapshot(context.Background(), r.scope("key-3"))
			require.NoError(t, err)
			require.Len(t, snap.Tickets, 1, "kept")
		}},
		{name: "a ticket on a cooling key is given back", setup: func(r *poolRig) {
			r.fill("key-3", 5)
			require.True(r.t, r.reserve("key-3", "act-x", true).Booked)
			r.block("key-3", capacity.Block{Reason: capacity.Cooldown, Until: r.t0.Add(5 * time.Second)})
			r.fill("key-2", 1)
		}, want: "key-1", granted: true, check: func(t *testing.T, r *poolRig, _ error) {
			snap, err := r.store.Snapshot(context.Background(), r.scope("key-3"))
			require.NoError(t, err)
			assert.Empty(t, snap.Tickets, "released")
		}},
		{name: "all out: a typed error naming each key", setup: func(r *poolRig) {
			r.block("key-1", revoked(r.t0.Add(time.Minute)))
			r.block("key-2", capacity.Block{Reason: capacity.QuotaExhausted, Until: r.t0.Add(time.Hour), Detail: "insufficient_quota"})
			r.block("key-3", capacity.Block{Reason: capacity.CredentialDisabled, Until: r.t0.Add(time.Minute), Detail: "model_not_found"})
		}, check: func(t *testing.T, r *poolRig, err error) {
			require.True(t, tgerrors.IsQuotaExhausted(err), "%v", err)
			ae := err.(*temporal.ApplicationError)
			assert.True(t, ae.NonRetryable())
			d, ok := tgerrors.DetailsOf(err)
			require.True(t, ok)
			assert.Equal(t, tgerrors.ReasonPoolExhausted, d.Reason)
			assert.Equal(t, "openai/gpt-4o/pool", d.Scope)
			assert.Equal(t, r.t0.Add(time.Hour), d.ResetAt, "when the key out of quota comes back")
			for _, want := range []string{"pool pool", "key-1 credential_disabled (invalid_api_key) for 1m0s", "key-2 quota_exhausted (insufficient_quota) for 1h0m0s", "key-3 no_access (model_not_found)"} {
				assert.Contains(t, ae.Message(), want)
			}
		}},
		{name: "all refused: BadCredential", setup: func(r *poolRig) {
			for _, k := range []string{"key-1", "key-2", "key-3"} {
				r.block(k, revoked(r.t0.Add(time.Minute)))
			}
		}, check: func(t *testing.T, _ *poolRig, err error) {
			require.True(t, tgerrors.IsBadCredential(err), "%v", err)
			d, _ := tgerrors.DetailsOf(err)
			assert.Equal(t, "invalid_api_key", d.Code)
		}},
		{name: "a probe in flight is waited for, not out", setup: func(r *poolRig) {
			for _, k := range []string{"key-1", "key-2", "key-3"} {
				r.block(k, revoked(r.t0.Add(time.Minute)))
			}
			r.block("key-2", capacity.Block{Reason: capacity.CredentialDisabled, Credential: true, Probing: true, Until: r.t0.Add(2 * time.Minute)})
		}, want: "key-2"},
		{name: "no key before the deadline", setup: func(r *poolRig) {
			for _, k := range []string{"key-1", "key-2", "key-3"} {
				r.fill(k, 5)
			}
		}, deadline: 500 * time.Millisecond, check: func(t *testing.T, _ *poolRig, err error) {
			require.True(t, tgerrors.IsDeadlineUnmeetable(err), "%v", err)
			assert.Contains(t, err.Error(), "key-1 deadline (requests)")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPoolRig(t)
			tc.setup(r)
			g := r.call(tc.ties)
			if tc.deadline > 0 {
				g.dispatchBy = r.t0.Add(tc.deadline)
			}
			res, granted, err := g.choose(context.Background())
			if tc.want == "" {
				require.Error(t, err)
				assert.False(t, granted)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.want, g.pool.chosen.name)
				assert.Equal(t, r.scope(tc.want), g.scope, "the call goes on the member's scope")
				assert.Equal(t, tc.granted, granted)
				if granted {
					assert.Equal(t, r.scope(tc.want), res.Lease.Scope)
				}
			}
			if tc.check != nil {
				tc.check(t, r, err)
			}
		})
	}
}

// TestPoolOptions: pools are validated when the gate is built.
func TestPoolOptions(t *testing.T) {
	store := capacity.NewMemoryStore(capacity.MemoryOptions{})
	limits := func(capacity.Scope) (capacity.Limits, bool) { return capacity.Limits{}, true }
	for _, tc := range []struct {
		name  string
		pools map[string][]string
		err   string
	}{
		{"valid", map[string][]string{"pool": {"a", "b"}}, ""},
		{"no members", map[string][]string{"pool": {}}, "has no members"},
		{"a member twice", map[string][]string{"pool": {"a", "a"}}, `lists "a" twice`},
		{"a pool inside a pool", map[string][]string{"pool": {"a", "inner"}, "inner": {"b"}}, "both a pool and a member"},
		{"an empty name", map[string][]string{"pool": {""}}, "empty name"},
		{"a key as a name", map[string][]string{"pool": {"sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123"}}, "shape of an API key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Options{Store: store, Limits: limits, Pools: tc.pools}.withDefaults()
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidOptions)
			assert.Contains(t, err.Error(), tc.err)
			assert.NotContains(t, err.Error(), "sk-proj")
		})
	}
}

// TestCredential: an activity learns the member chosen for the pool its
// input names, and nothing else.
func TestCredential(t *testing.T) {
	ctx := context.WithValue(context.Background(), poolChoiceKey{}, poolChoice{pool: "pool", member: "key-2"})
	assert.Equal(t, "key-2", Credential(ctx, "pool"))
	assert.Equal(t, "team-a", Credential(ctx, "team-a"), "another name is itself")
	assert.Equal(t, "pool", Credential(context.Background(), "pool"), "outside a gated call")
}

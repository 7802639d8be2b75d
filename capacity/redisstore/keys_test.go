package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/tuning"
)

var keysScope = capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o mini", Credential: "team/a", Region: "eu"}

func oneCharge() capacity.Charges {
	var c capacity.Charges
	c[capacity.Requests], c[capacity.RequestsPerDay], c[capacity.InFlight] = 1, 1, 1
	return c
}

// allKeys returns every key of prefix with its TTL.
func allKeys(t *testing.T, rdb *redis.Client, prefix string) map[string]time.Duration {
	ctx := context.Background()
	out := map[string]time.Duration{}
	iter := rdb.Scan(ctx, 0, "{"+prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		ttl, err := rdb.PTTL(ctx, iter.Val()).Result()
		require.NoError(t, err)
		out[iter.Val()] = ttl
	}
	require.NoError(t, iter.Err())
	return out
}

func TestKeyLayout(t *testing.T) {
	k := newScopeKeys("tg", keysScope)
	tag := "{tg:openai/team%2Fa}"
	require.Equal(t, []string{
		tag + ":epoch",
		tag + ":cb",
		tag + ":state:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":leases:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":tickets:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":ticket_expiries:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":ticket_times:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":ended:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":flows:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":keycaps:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":recent:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":order:0:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":order:1:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":order:2:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":order:3:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":order:4:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":order:5:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":order:6:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":order:7:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":leasemarks:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":lease_expiries:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":lapsed:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":text_until",
		tag + ":recentheld:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":livesums:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":lapsing:openai/gpt-4o%20mini/team%2Fa/eu",
		tag + ":rec:openai/gpt-4o%20mini/team%2Fa/eu",
	}, k.keys)
	require.Equal(t, tag+":n:openai/gpt-4o%20mini/team%2Fa/eu", k.channel)
	require.Equal(t, tag+":f:openai/gpt-4o%20mini/team%2Fa/eu:", k.failure)
	// Every key and the channel share one hash tag: one Cluster slot.
	for _, key := range append(k.keys, k.channel, k.failure+"call") {
		require.True(t, strings.HasPrefix(key, tag), key)
		require.Contains(t, key+":"+keysScope.Key(), keysScope.CredentialKey())
	}
	// A sibling scope on the same credential shares the tag (and the
	// credential block key); another credential does not.
	sib := keysScope
	sib.LimitGroup = "o3"
	require.Equal(t, k.keys[keyCredBlock], newScopeKeys("tg", sib).keys[keyCredBlock])
	other := keysScope
	other.Credential = "team-b"
	require.NotEqual(t, k.keys[keyCredBlock], newScopeKeys("tg", other).keys[keyCredBlock])
}

// requireTTL asserts that a key's TTL got, read since (at most) elapsed
// after the first operation that could have set it, is want + slack give or
// take elapsed (and a few milliseconds of rounding): Redis counts a TTL
// down in real time, so the window grows with the machine's delays instead
// of failing on them, and a TTL that is wrong by more than the test took
// still fails.
func requireTTL(t *testing.T, want, got, elapsed time.Duration, msgAndArgs ...any) {
	t.Helper()
	tol := elapsed + 5*time.Millisecond
	require.InDelta(t, (want + slack).Seconds(), got.Seconds(), tol.Seconds(), msgAndArgs...)
}

// TestKeyTTLs: every key says when it stops mattering; only the epoch key
// has no TTL. Nothing that traffic does keeps a key alive past its state.
func TestKeyTTLs(t *testing.T) {
	t.Parallel()
	s, rdb := newTestStore(t, Options{Engine: EngineScripts})
	ctx := context.Background()
	began := time.Now()
	prefix := s.opts.Prefix
	k := s.keysFor(keysScope)
	// 600/min, 1 s burst: 10 at once, full again 0.1 s after one grant.
	l := capacity.Limits{RequestsPerMinute: 600, RequestsPerDay: 1000, SafetyMargin: 1, Burst: time.Second}
	res, err := s.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: "c1", Attempt: 1, Charges: oneCharge(), TTL: 30 * time.Second})
	require.NoError(t, err)
	require.True(t, res.Granted)
	require.NoError(t, s.Block(ctx, keysScope, capacity.Block{Reason: capacity.CredentialDisabled, Until: time.Now().Add(20 * time.Second), Credential: true}))
	_, err = s.AddFailure(ctx, keysScope, "c1", 10*time.Second)
	require.NoError(t, err)

	keys := allKeys(t, rdb, prefix)
	near := func(key string, want time.Duration) {
		t.Helper()
		got, ok := keys[key]
		require.True(t, ok, "missing %s in %v", key, keys)
		requireTTL(t, want, got, time.Since(began), "%s: TTL %v, want %v + slack", key, got, want)
	}
	require.Equal(t, time.Duration(-1), keys[k.keys[keyEpoch]], "the epoch key has no TTL")
	near(k.keys[keyLeases], 30*time.Second)                         // the latest lease expiry
	near(k.keys[keyState], time.Until(l.DayReset.Next(time.Now()))) // today's count matters until the boundary
	near(k.keys[keyCredBlock], 20*time.Second)                      // the block's end
	near(k.tag+recCredSuffix, 20*time.Second+recSlack-slack)        // the records engine's copy of it
	near(k.failure+"c1", 10*time.Second)                            // forgotten then
	near(k.keys[keyFlows], time.Until(l.DayReset.Next(time.Now()))) // fair queuing lives as long as the state
	near(k.keys[keyRecent], tuning.ReorderWindow)                   // the grants that may still be reordered
	near(k.keys[keyLiveSums], 30*time.Second)                       // as the leases
	near(k.keys[keyLeaseExpiries], 30*time.Second)                  // as the leases
	require.Len(t, keys, 10, "no other keys: %v", keys)             // no ticket was booked; one group of recent grants, in the state

	// Settled, the scope matters until its bucket is full again (0.1 s) and
	// its daily count resets (the day boundary), not until a lease expiry.
	require.NoError(t, s.Settle(ctx, res.Lease, res.Lease.Charges))
	keys = allKeys(t, rdb, prefix)
	_, ok := keys[k.keys[keyLeases]]
	require.False(t, ok, "no lease left, no lease key")
	_, ok = keys[k.keys[keyLiveSums]]
	require.False(t, ok, "no lease left, no live sums")
	_, ok = keys[k.keys[keyLeaseExpiries]]
	require.False(t, ok, "no lease left, no lease expiries")
	for _, key := range []int{keyEnded, keyLapsed} {
		_, ok = keys[k.keys[key]]
		require.False(t, ok, "a settled lease leaves no record: %s", k.keys[key])
	}
	requireTTL(t, time.Until(l.DayReset.Next(time.Now())), keys[k.keys[keyState]], time.Since(began))

	// Without a daily limit the state lives only until the bucket is full.
	l.RequestsPerDay = 0
	other := keysScope
	other.Credential = "other" // not under the credential block
	began = time.Now()
	res, err = s.Reserve(ctx, capacity.Request{Scope: other, Limits: l, Call: "c2", Attempt: 1, Charges: oneCharge(), TTL: time.Second})
	require.NoError(t, err)
	require.True(t, res.Granted)
	require.NoError(t, s.Settle(ctx, res.Lease, res.Lease.Charges))
	ttl := rdb.PTTL(ctx, s.keysFor(other).keys[keyState]).Val()
	requireTTL(t, time.Second, ttl, time.Since(began), "full again in 0.1 s, the lease was until 1 s")
}

// TestStateLost: a store that finds its keys gone (restart, failover,
// eviction) starts the scope at the burst level, and counts the reset.
func TestStateLost(t *testing.T) {
	t.Parallel()
	s, rdb := newTestStore(t, Options{Engine: EngineScripts})
	ctx := context.Background()
	l := capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1, Burst: 3 * time.Second} // 3 at once, 1/s
	reserve := func(call string) capacity.Reservation {
		res, err := s.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: call, Attempt: 1, Charges: oneCharge()})
		require.NoError(t, err)
		return res
	}
	for i := range 3 {
		require.True(t, reserve("a"+string(rune('0'+i))).Granted)
	}
	require.False(t, reserve("a3").Granted)

	// Everything lost, as after a restart without persistence.
	deleteKeys(t, rdb, s.opts.Prefix)
	for i := range 3 {
		require.True(t, reserve("b"+string(rune('0'+i))).Granted, "burst level after the loss")
	}
	require.False(t, reserve("b3").Granted)
	require.Equal(t, int64(1), s.Stats().Resets)

	// Only the epoch lost (evicted): the state it vouched for is dropped too.
	require.NoError(t, rdb.Del(ctx, s.keysFor(keysScope).keys[keyEpoch]).Err())
	for i := range 3 {
		require.True(t, reserve("c"+string(rune('0'+i))).Granted)
	}
	require.Equal(t, int64(2), s.Stats().Resets)
	snap, err := s.Snapshot(ctx, keysScope)
	require.NoError(t, err)
	require.Len(t, snap.Leases, 3, "the leases of the lost state are gone with it")
}

// TestNoteEpoch: each change of a credential's epoch counts one reset; the
// first epoch seen does not, nor does the reply that created an epoch when
// another reply carrying it was read first (two operations crossed on a
// new credential).
func TestNoteEpoch(t *testing.T) {
	type reply struct {
		epoch string
		reset bool
	}
	for _, tc := range []struct {
		name    string
		replies []reply
		resets  int64
	}{
		{"first use", []reply{{"e1", true}, {"e1", false}}, 0},
		{"crossed on first use", []reply{{"e1", false}, {"e1", true}}, 0},
		{"lost", []reply{{"e1", false}, {"e2", true}, {"e2", false}}, 1},
		{"lost, crossed", []reply{{"e1", false}, {"e2", false}, {"e2", true}}, 1},
		{"lost twice", []reply{{"e1", false}, {"e2", true}, {"e3", true}}, 2},
		{"read-only on a new credential", []reply{{"", false}, {"e1", true}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
			defer rdb.Close()
			s, err := New(rdb, Options{Engine: EngineScripts})
			require.NoError(t, err)
			k := s.keysFor(keysScope)
			for _, r := range tc.replies {
				s.noteEpoch(k, header{epoch: r.epoch, reset: r.reset})
			}
			require.Equal(t, tc.resets, s.Stats().Resets)
		})
	}
}

// TestCorruptState: a key overwritten by something else is an error, never
// a panic and never a grant.
func TestCorruptState(t *testing.T) {
	t.Parallel()
	for name, value := range map[string]string{
		"unknown format":   "not a state \xc1",
		"truncated state":  "\x02\x00",
		"state of a stray": "\x02" + strings.Repeat("x", 40),
	} {
		t.Run(name, func(t *testing.T) {
			s, rdb := newTestStore(t, Options{Engine: EngineScripts})
			ctx := context.Background()
			l := capacity.Limits{RequestsPerMinute: 60}
			_, err := s.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: "a", Attempt: 1, Charges: oneCharge()})
			require.NoError(t, err)
			require.NoError(t, rdb.Set(ctx, s.keysFor(keysScope).keys[keyState], value, 0).Err())
			res, err := s.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: "b", Attempt: 1, Charges: oneCharge()})
			require.Error(t, err)
			require.False(t, res.Granted)
			require.NotErrorIs(t, err, capacity.ErrStoreUnavailable, "a bad key is not an outage")
		})
	}
}

// TestOtherStateFormat: the keys of the struct-packed format (before the
// state became a hash) are not read, and a state hash of a format this
// version does not know is refused with an error, never guessed at.
func TestOtherStateFormat(t *testing.T) {
	t.Parallel()
	s, rdb := newTestStore(t, Options{Engine: EngineScripts})
	ctx := context.Background()
	l := capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1, Burst: 2 * time.Second} // 2 at once
	reserve := func(call string) (capacity.Reservation, error) {
		return s.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: call, Attempt: 1, Charges: oneCharge()})
	}
	tag := "{" + s.opts.Prefix + ":" + keysScope.CredentialKey() + "}"
	require.NoError(t, rdb.Set(ctx, tag+":s:"+keysScope.Key(), "\x02"+strings.Repeat("\x00", 40), time.Minute).Err())
	res, err := reserve("a0")
	require.NoError(t, err)
	require.True(t, res.Granted, "an earlier format's key is not this version's state")

	require.NoError(t, rdb.HSet(ctx, s.keysFor(keysScope).keys[keyState], "format", stateFormat+1).Err())
	res, err = reserve("a1")
	require.ErrorContains(t, err, "unknown scope state format")
	require.False(t, res.Granted)
	require.NotErrorIs(t, err, capacity.ErrStoreUnavailable, "a bad key is not an outage")

	// A packed state that is not a map, or not msgpack at all.
	for _, packed := range []string{"garbage", "\xde\x00"} {
		require.NoError(t, rdb.HSet(ctx, s.keysFor(keysScope).keys[keyState], "format", stateFormat, "packed", packed).Err())
		res, err = reserve("a2")
		require.Error(t, err, "%q", packed)
		require.False(t, res.Granted)
	}
}

// TestBlockDetailStored: a block's detail is kept as given, but for NUL
// bytes (the state stores it as a zero-terminated string).
func TestBlockDetailStored(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t, Options{Engine: EngineScripts})
	ctx := context.Background()
	l := capacity.Limits{RequestsPerMinute: 60}
	_, err := s.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: "a", Attempt: 1, Charges: oneCharge()})
	require.NoError(t, err)
	require.NoError(t, s.Block(ctx, keysScope, capacity.Block{Reason: capacity.Cooldown, Until: time.Now().Add(time.Minute), Detail: "429 from\x00 provider"}))
	snap, err := s.Snapshot(ctx, keysScope)
	require.NoError(t, err)
	require.Len(t, snap.Blocks, 1)
	require.Equal(t, "429 from provider", snap.Blocks[0].Detail)
}

// TestLeaseKeysExpiredFreeEverySlot: a Redis paused past every lease's
// expiry and the lease keys' TTL comes back without the keys (DEL here,
// as the TTL does): the scope's slots are free once the leases would have
// expired, not held by a count of leases nothing lists.
func TestLeaseKeysExpiredFreeEverySlot(t *testing.T) {
	t.Parallel()
	s, rdb := newTestStore(t, Options{Engine: EngineScripts})
	ctx := context.Background()
	k := s.keysFor(keysScope)
	l := capacity.Limits{MaxInFlight: 2, RequestsPerMinute: 6000, SafetyMargin: 1}
	reserve := func(call string) capacity.Reservation {
		t.Helper()
		res, err := s.Reserve(ctx, capacity.Request{Scope: keysScope, Limits: l, Call: call, Attempt: 1, Charges: oneCharge(), TTL: 200 * time.Millisecond})
		require.NoError(t, err)
		return res
	}
	require.True(t, reserve("a").Granted)
	require.True(t, reserve("b").Granted)
	require.False(t, reserve("c").Granted, "both slots held")
	require.NoError(t, rdb.Del(ctx, k.keys[keyLeases], k.keys[keyLiveSums], k.keys[keyLeaseExpiries]).Err())

	// Safety net only: the slots come back once the lease keys' TTL has
	// passed (the leases' expiry, 200 ms, plus a second of slack).
	require.Eventually(t, func() bool { return reserve("c").Granted }, 10*time.Second, 20*time.Millisecond,
		"a slot comes back once the leases would have expired")
	snap, err := s.Snapshot(ctx, keysScope)
	require.NoError(t, err)
	require.Len(t, snap.Leases, 1, "c")
	require.Equal(t, float64(1), snap.Level[capacity.InFlight], "one slot free: the lost leases hold none")
}

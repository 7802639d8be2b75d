package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// TestSentinelFailover fails a store over with Redis Sentinel after its
// master took writes its replica never received (replication is cut first,
// as a lagging replica would miss the last writes), and shows what the
// store does then:
//
//   - a credential whose epoch the replica had: the lost grants are
//     forgotten without a trace, and admitted again;
//   - a credential first used after the cut: the replica has no epoch, so
//     the store detects the loss, counts a reset and starts the scope
//     afresh; its leases are unknown (Renew: capacity.ErrLeaseNotFound).
//
// The store answers capacity.ErrStoreUnavailable during the failover and
// carries on through the same redis.NewFailoverClient after it. On the
// records engine the loss of kept's last grants is seen too: its records'
// version went back.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	for _, engine := range []Engine{EngineScripts, EngineRecords} {
		t.Run(engine.String(), func(t *testing.T) { testSentinelFailover(t, engine) })
	}
}

func testSentinelFailover(t *testing.T, engine Engine) {
	ctx := context.Background()
	master := testenv.StartRedisServer(t, "")
	mc := redis.NewClient(&redis.Options{Addr: master.Addr()})
	defer mc.Close()
	require.NoError(t, mc.Do(ctx, "ACL", "SETUSER", "repl", "on", ">repl-secret", "+psync", "+replconf", "+ping").Err())
	host, port, _ := strings.Cut(master.Addr(), ":")
	replica := testenv.StartRedisServer(t, "", "--replicaof", host, port, "--masteruser", "repl", "--masterauth", "repl-secret")
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	defer rc.Close()
	linkUp := func() bool {
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}
	require.Eventually(t, linkUp, 10*time.Second, 20*time.Millisecond, "the replica never synced")
	// Down after 2 s, not less: under a full test run's load a master slow to
	// answer for half a second must not be failed over before the test kills it.
	sentinel := testenv.StartRedisSentinel(t, "tollgate", master.Addr(), 2*time.Second)
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addr()})
	defer sc.Close()
	require.Eventually(t, func() bool {
		replicas, err := sc.Replicas(ctx, "tollgate").Result()
		return err == nil && len(replicas) == 1 && replicas[0]["flags"] == "slave" && replicas[0]["master-link-status"] == "ok"
	}, 15*time.Second, 50*time.Millisecond, "the sentinel never saw the replica")

	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: "tollgate", SentinelAddrs: []string{sentinel.Addr()},
		DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, MaxRetries: 1,
	})
	defer rdb.Close()
	s, err := New(rdb, Options{Prefix: "sentinel", ProbeInterval: 100 * time.Millisecond, Engine: engine})
	require.NoError(t, err)
	defer s.Close()

	// A day budget of 5 requests: it does not refill while the test runs, so
	// every grant the failover forgot shows as one granted again.
	limits := capacity.Limits{RequestsPerDay: 5, RequestsPerMinute: 6000, SafetyMargin: 1}
	kept := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "kept"}
	lost := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "lost"}
	calls := 0
	reserve := func(sc capacity.Scope) (capacity.Reservation, error) {
		calls++
		return s.Reserve(ctx, capacity.Request{Scope: sc, Limits: limits, Call: fmt.Sprintf("c%d", calls), Attempt: 1, Charges: oneCharge(), TTL: time.Minute})
	}
	// grant requires n grants on sc, and with spent the denial after them.
	grant := func(sc capacity.Scope, n int, spent bool) []capacity.Lease {
		t.Helper()
		var leases []capacity.Lease
		for range n {
			res, err := reserve(sc)
			require.NoError(t, err)
			require.True(t, res.Granted, "%s (resets seen: %d)", sc.Credential, s.Stats().Resets)
			leases = append(leases, res.Lease)
		}
		if spent {
			res, err := reserve(sc)
			require.NoError(t, err)
			require.False(t, res.Granted, "%s: the day's budget is spent (resets seen: %d)", sc.Credential, s.Stats().Resets)
		}
		return leases
	}

	// Replicated: 2 of kept's 5.
	grant(kept, 2, false)
	// WAIT would not do: it waits for the writes of the connection it is
	// sent on, and the store wrote on its own connections. Compare offsets.
	written := replOffset(t, mc)
	require.Eventually(t, func() bool { return replOffset(t, rc) >= written },
		10*time.Second, 20*time.Millisecond, "the first grants never reached the replica")

	// Replication cut: what follows is written on the master only.
	require.NoError(t, mc.Do(ctx, "ACL", "SETUSER", "repl", "off").Err())
	require.NoError(t, mc.Do(ctx, "CLIENT", "KILL", "USER", "repl").Err())
	require.Eventually(t, func() bool { return !linkUp() }, 10*time.Second, 20*time.Millisecond)
	grant(kept, 3, true)
	held := grant(lost, 5, true)

	// Failover: the store fails closed until the client finds the new master.
	master.Kill()
	killed := time.Now()
	unavailable := 0
	var res capacity.Reservation
	for {
		res, err = reserve(lost)
		if !errors.Is(err, capacity.ErrStoreUnavailable) {
			break
		}
		unavailable++
		require.Less(t, time.Since(killed), 30*time.Second, "the store never reached a new master: %v", err)
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, err)
	resumed := time.Since(killed)
	addr, err := sc.GetMasterAddrByName(ctx, "tollgate").Result()
	require.NoError(t, err)
	require.Equal(t, replica.Addr(), strings.Join(addr, ":"), "the sentinel promoted the replica")
	require.Positive(t, unavailable, "the store failed closed during the failover")

	// lost: the replica never had its epoch: a reset, counted, and the day
	// budget starts afresh; the lease held across the failover is unknown.
	require.True(t, res.Granted)
	grant(lost, 4, true)
	require.EqualValues(t, 1, s.Stats().Resets, "the reset of lost is counted")
	_, err = s.Renew(ctx, held[0], time.Minute)
	require.ErrorIs(t, err, capacity.ErrLeaseNotFound)
	// kept: the replica had its epoch and its first 2 grants, not the last
	// 3: those are granted again. The scripts cannot tell; the records
	// engine sees the scope's version go back, and counts a reset.
	grant(kept, 3, true)
	wantResets := map[Engine]int64{EngineScripts: 1, EngineRecords: 2}[engine]
	require.Equal(t, wantResets, s.Stats().Resets, "kept's loss seen on the records engine only")

	t.Logf("master killed; the store answered ErrStoreUnavailable %d times, then granted again on the promoted replica %v after the kill",
		unavailable, resumed.Round(10*time.Millisecond))
	t.Logf("credential lost (first used after the cut): reset detected (Stats().Resets = %d), its 5 requests/day granted again, its lease unknown", s.Stats().Resets)
	t.Logf("credential kept (epoch replicated): its 3 grants after the cut forgotten and granted again; resets seen: %d", s.Stats().Resets)
}

// replOffset returns the replication offset c's server has reached: all it
// wrote, for a master; all it received, for a replica.
func replOffset(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "replication").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "master_repl_offset:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no master_repl_offset in INFO replication:\n%s", info)
	return 0
}

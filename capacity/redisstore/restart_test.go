package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// TestRedisRestart: Redis is killed mid-run and restarted empty. Workers get
// typed errors while it is down (fail closed; never a panic, never a blind
// grant), reconnect, reload their scripts (NOSCRIPT → EVAL), detect the
// lost state (the epoch; the records engine: the scope's version gone
// back) and admit again from the burst level. It runs on both engines.
func TestRedisRestart(t *testing.T) {
	t.Parallel()
	for _, engine := range []Engine{EngineScripts, EngineRecords} {
		t.Run(engine.String(), func(t *testing.T) { testRedisRestart(t, engine) })
	}
}

func testRedisRestart(t *testing.T, engine Engine) {
	srv := testenv.StartRedisServer(t, "")
	limits := capacity.Limits{RequestsPerMinute: 1200, SafetyMargin: 1, Burst: time.Second} // 20/s, 20 at once
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "restart"}
	var stores []*Store
	for range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DialTimeout: 200 * time.Millisecond, MaxRetries: 1})
		defer rdb.Close()
		s, err := New(rdb, Options{Prefix: "restart", ProbeInterval: 100 * time.Millisecond, Engine: engine})
		require.NoError(t, err)
		defer s.Close()
		stores = append(stores, s)
	}

	// The phases are marked by the events, not by the clock: what happens
	// while Redis is up before the kill, down, and up again once the new
	// server answers. The timeline (logged) is by slot of wall time.
	const slot = 250 * time.Millisecond
	const (
		beforeKill = iota
		down
		restarted
	)
	// The outage outlasts the client's finding it: its dials fail for
	// about 0.8 s before a command fails, and a pipeline (the records
	// engine's exchanges, a scope's calls queued behind them) tries twice;
	// one took 2.6 s here.
	killAt, restartAt := 1500*time.Millisecond, 5500*time.Millisecond
	const afterRestart = 2 * time.Second // of traffic once the new server answers
	type tally struct{ grants, denials, unavailable, other int }
	var timeline []tally
	var byPhase [3]tally
	phase := beforeKill
	var mu sync.Mutex
	var otherErrs []error
	start := time.Now()
	record := func(f func(*tally)) {
		mu.Lock()
		i := int(time.Since(start) / slot)
		for len(timeline) <= i {
			timeline = append(timeline, tally{})
		}
		f(&timeline[i])
		f(&byPhase[phase])
		mu.Unlock()
	}
	setPhase := func(p int) {
		mu.Lock()
		phase = p
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for w, s := range stores {
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var c capacity.Charges
				c[capacity.Requests], c[capacity.InFlight] = 1, 1
				for i := 0; ctx.Err() == nil; i++ {
					req := capacity.Request{Scope: sc, Limits: limits, Call: fmt.Sprintf("w%d-g%d-%d", w, g, i), Attempt: 1, Charges: c}
					res, err := s.Reserve(ctx, req)
					switch {
					case ctx.Err() != nil:
						return
					case errors.Is(err, capacity.ErrStoreUnavailable):
						record(func(t *tally) { t.unavailable++ })
						time.Sleep(20 * time.Millisecond)
					case err != nil:
						record(func(t *tally) { t.other++ })
						mu.Lock()
						otherErrs = append(otherErrs, err)
						mu.Unlock()
						time.Sleep(20 * time.Millisecond)
					case res.Granted:
						record(func(t *tally) { t.grants++ })
						time.Sleep(5 * time.Millisecond)
						_ = s.Settle(context.Background(), res.Lease, res.Lease.Charges)
					default:
						record(func(t *tally) { t.denials++ })
						time.Sleep(max(res.RetryAt.Sub(res.Now), time.Millisecond))
					}
				}
			}()
		}
	}
	time.Sleep(killAt)
	srv.Kill()
	setPhase(down)
	time.Sleep(restartAt - killAt)
	srv2 := testenv.StartRedisServer(t, srv.Port)
	setPhase(restarted)
	time.Sleep(afterRestart)
	cancel()
	wg.Wait()

	t.Logf("Redis (no persistence) killed at %v and restarted empty at %v; 2 workers × 4 goroutines, 20 requests/s, burst 20:", killAt, restartAt)
	for i, s := range timeline {
		at := time.Duration(i) * slot
		t.Logf("  [%4v, %4v) granted %3d  denied %3d  unavailable %3d  other errors %d", at, at+slot, s.grants, s.denials, s.unavailable, s.other)
	}
	before, during, after := byPhase[beforeKill].grants, byPhase[down].unavailable, byPhase[restarted].grants
	require.Empty(t, otherErrs, "every error while Redis was down wraps capacity.ErrStoreUnavailable")
	require.Positive(t, during, "the outage was seen as ErrStoreUnavailable")
	require.Positive(t, after, "admission resumed")
	var resets int64
	for _, s := range stores {
		resets += s.Stats().Resets
	}
	require.Positive(t, resets, "the lost state was detected")
	rdb := redis.NewClient(&redis.Options{Addr: srv2.Addr()})
	defer rdb.Close()
	stats, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	// The scripts load their library again after "Function not found";
	// the records engine sends its script with EVAL after NOSCRIPT.
	reload := map[Engine]string{EngineScripts: "cmdstat_function|load:", EngineRecords: "cmdstat_eval:"}[engine]
	require.Contains(t, stats, reload, "the scripts were loaded again")
	t.Logf("grants: %d before the kill, %d once the new server answered; %d unavailable errors while it was down; %d resets detected; scripts reloaded: %s",
		before, after, during, resets, strings.Fields(stats[strings.Index(stats, reload):])[0])
}

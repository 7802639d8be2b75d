package redisstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

const (
	crashLeases  = 50
	crashTTL     = 5 * time.Second // the holder renews in time on a loaded machine
	crashRenew   = 250 * time.Millisecond
	crashWaiters = 2 // processes, crashLeases/crashWaiters goroutines each
)

var crashScope = capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "claude", Credential: "crash"}

var crashLimits = capacity.Limits{RequestsPerMinute: 60000, MaxInFlight: crashLeases, SafetyMargin: 1}

func crashReq(call string) capacity.Request {
	var c capacity.Charges
	c[capacity.Requests], c[capacity.InFlight] = 1, 1
	return capacity.Request{Scope: crashScope, Limits: crashLimits, Call: call, Attempt: 1, Charges: c, TTL: crashTTL}
}

// TestCrashReclaimsLeases: a process holding every in-flight slot (50
// leases, heartbeating them) is killed with SIGKILL; the waiting processes
// regain the slots when the leases expire, and not before, with no sweeper:
// any later call on the scope reclaims them. The leases left by the kill
// expire within the lease TTL of it. Both are asserted on the store's clock
// as orders, never as a measured delay: how soon after an expiry a waiter
// wakes depends on the machine's load, and is only logged.
func TestCrashReclaimsLeases(t *testing.T) {
	switch os.Getenv(envRole) {
	case "crash-holder":
		crashHolder(t)
		return
	case "crash-waiter":
		crashWaiter(t)
		return
	}
	t.Parallel()
	for _, engine := range []Engine{EngineScripts, EngineRecords} {
		t.Run(engine.String(), func(t *testing.T) { testCrashReclaimsLeases(t, engine) })
	}
}

// testCrashReclaimsLeases is TestCrashReclaimsLeases on engine.
func testCrashReclaimsLeases(t *testing.T, engine Engine) {
	t.Parallel() // its own prefix; asserted on Redis time, as orders
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	holder := child(t, "^TestCrashReclaimsLeases$", map[string]string{envRole: "crash-holder", envPrefix: prefix, envLog: ready, envEngine: engine.String()})
	require.NoError(t, holder.Start())
	defer func() { _ = holder.Process.Kill() }()
	require.Eventually(t, func() bool { _, err := os.Stat(ready); return err == nil }, 20*time.Second, 10*time.Millisecond,
		"holder never held its leases:\n%s", holder.Stdout)

	var waiters []string
	for p := range crashWaiters {
		log := filepath.Join(dir, fmt.Sprintf("waiter-%d.log", p))
		waiters = append(waiters, log)
		cmd := child(t, "^TestCrashReclaimsLeases$", map[string]string{envRole: "crash-waiter", envPrefix: prefix, envProc: strconv.Itoa(p), envLog: log, envEngine: engine.String()})
		require.NoError(t, cmd.Start())
		defer func() {
			if err := cmd.Wait(); err != nil {
				t.Errorf("waiter: %v\n%s", err, cmd.Stdout)
			}
		}()
	}
	s, err := New(rdb, Options{Prefix: prefix, Engine: engine})
	require.NoError(t, err)
	defer s.Close()
	time.Sleep(time.Second) // the waiters are denied and park
	snap, err := s.Snapshot(context.Background(), crashScope)
	require.NoError(t, err)
	require.Len(t, snap.Leases, crashLeases, "the holder holds every slot")
	for _, l := range snap.Leases {
		require.True(t, strings.HasPrefix(l.Call, "holder-"), l.Call)
	}

	// A renewal only moves an expiry later: the leases cannot expire
	// before the times this snapshot shows.
	var notBefore []time.Time
	for _, l := range snap.Leases {
		notBefore = append(notBefore, l.Expires)
	}
	require.NoError(t, holder.Process.Signal(syscall.SIGKILL))
	_ = holder.Wait()
	// A renewal the holder sent as it died may still wait in Redis's
	// input: the PING's round trip lets Redis run it, so the TIME after
	// it is later than the holder's last command.
	require.NoError(t, rdb.Ping(context.Background()).Err())
	killed := redisNow(t, rdb)
	t.Logf("holder (%d leases, TTL %v, renewed every %v) killed with SIGKILL", crashLeases, crashTTL, crashRenew)
	// Nothing renews them now: each lease still live expires within the
	// lease TTL of the kill.
	left, err := s.Snapshot(context.Background(), crashScope)
	require.NoError(t, err)
	for _, l := range left.Leases {
		if strings.HasPrefix(l.Call, "holder-") {
			require.False(t, l.Expires.After(killed.Add(crashTTL)), "lease %s expires %v after the kill (TTL %v)", l.Call, l.Expires.Sub(killed), crashTTL)
		}
	}

	// Every waiter logs the Redis time of its grant.
	var grants []time.Time
	require.Eventually(t, func() bool {
		grants = grants[:0]
		for _, w := range waiters {
			b, _ := os.ReadFile(w)
			for _, f := range strings.Fields(string(b)) {
				ns, err := strconv.ParseInt(f, 10, 64)
				if err == nil {
					grants = append(grants, time.Unix(0, ns))
				}
			}
		}
		return len(grants) == crashLeases
	}, 10*time.Second, 20*time.Millisecond, "the waiters did not regain every slot")
	slices.SortFunc(grants, time.Time.Compare)
	slices.SortFunc(notBefore, time.Time.Compare)
	first, last := grants[0], grants[len(grants)-1]
	t.Logf("the other processes regained %d/%d in-flight slots: first %v, all %v after the kill (lease TTL %v)",
		len(grants), crashLeases, first.Sub(killed).Round(time.Millisecond), last.Sub(killed).Round(time.Millisecond), crashTTL)
	require.True(t, first.After(killed), "no slot was free before the kill")
	// A slot frees only when a lease expires: the k-th grant comes no
	// earlier than the k-th expiry.
	for k, g := range grants {
		require.False(t, g.Before(notBefore[k]), "grant %d at %v, before the %d-th lease could expire (%v)", k, g.Sub(killed), k, notBefore[k].Sub(killed))
	}
}

// crashHolder takes every slot, says so, and heartbeats until killed.
func crashHolder(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	s, err := New(rdb, childOptions())
	require.NoError(t, err)
	ctx := context.Background()
	leases := make([]capacity.Lease, crashLeases)
	for i := range leases {
		res, err := s.Reserve(ctx, crashReq("holder-"+strconv.Itoa(i)))
		require.NoError(t, err)
		require.True(t, res.Granted)
		leases[i] = res.Lease
	}
	require.NoError(t, os.WriteFile(os.Getenv(envLog), []byte("ready"), 0o644))
	for {
		time.Sleep(crashRenew)
		for i, le := range leases {
			if le, err = s.Renew(ctx, le, crashTTL); err == nil {
				leases[i] = le
			}
		}
	}
}

// crashWaiter waits for its share of the slots and logs when it got each.
func crashWaiter(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer rdb.Close()
	s, err := New(rdb, childOptions())
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := os.Create(os.Getenv(envLog))
	require.NoError(t, err)
	defer f.Close()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range crashLeases / crashWaiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := capacity.Wait(ctx, s, crashReq(fmt.Sprintf("waiter-%s-%d", os.Getenv(envProc), g)), capacity.WaitOptions{})
			if !assert(t, err == nil && res.Granted, "wait: %v %+v", err, res) {
				return
			}
			mu.Lock()
			fmt.Fprintf(f, "%d\n", res.Lease.GrantedAt.UnixNano())
			mu.Unlock()
		}()
	}
	wg.Wait()
}

func assert(t *testing.T, ok bool, format string, args ...any) bool {
	if !ok {
		t.Errorf(format, args...)
	}
	return ok
}

package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

// waitingFigures is what measureWaiting saw.
type waitingFigures struct {
	engine                   Engine
	waiters                  int
	quietCmds, releasingCmds int64 // client commands in each phase
	quietRate, releasingRate float64
	releases, granted        int
	phase                    time.Duration
}

// measureWaiting parks n calls in capacity.Wait on a scope whose in-flight
// slots are all held (an exhausted budget), spread over two stores (two
// workers), and counts the commands their clients send per waiting call per
// second: first while nothing is released, then while a slot is released
// every 100 ms (each release wakes the head of each worker's queue on the
// scripts, and each worker's waiters, decided in one batch, on the records
// engine). The stores start the scope on engine.
func measureWaiting(t testing.TB, engine Engine, n int, phase time.Duration) waitingFigures {
	rdb := testClient(t)
	prefix := testPrefix(t, rdb)
	holder, err := New(rdb, Options{Engine: engine, Prefix: prefix})
	require.NoError(t, err)
	defer holder.Close()
	hook := &countHook{}
	var workers []*Store
	for range 2 {
		c := testClient(t)
		c.AddHook(hook)
		w, err := New(c, Options{Engine: engine, Prefix: prefix})
		require.NoError(t, err)
		defer w.Close()
		workers = append(workers, w)
	}
	sc := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "claude", Credential: "waiting"}
	limits := capacity.Limits{RequestsPerMinute: 60000, MaxInFlight: 20, SafetyMargin: 1}
	var one capacity.Charges
	one[capacity.Requests], one[capacity.InFlight] = 1, 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var held []capacity.Lease
	for i := range 20 {
		res, err := holder.Reserve(ctx, capacity.Request{Scope: sc, Limits: limits, Call: "holder-" + strconv.Itoa(i), Attempt: 1, Charges: one, TTL: time.Minute})
		require.NoError(t, err)
		require.True(t, res.Granted)
		held = append(held, res.Lease)
	}
	var waiting, granted atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := workers[i%2]
			req := capacity.Request{Scope: sc, Limits: limits, Call: "waiter-" + strconv.Itoa(i), Attempt: 1, Charges: one, TTL: time.Minute}
			first := true
			res, err := capacity.Wait(ctx, w, req, capacity.WaitOptions{MaxWait: 5 * time.Minute, OnDenied: func(capacity.Reservation) {
				if first {
					first = false
					waiting.Add(1)
				}
			}})
			if err == nil && res.Granted {
				granted.Add(1)
			}
		}()
	}
	require.Eventually(t, func() bool { return waiting.Load() == int64(n) }, 30*time.Second, 10*time.Millisecond, "waiters parked")
	time.Sleep(100 * time.Millisecond) // let stragglers settle into their timers

	f := waitingFigures{engine: engine, waiters: n, phase: phase}
	before := hook.n.Load()
	time.Sleep(phase)
	f.quietCmds = hook.n.Load() - before

	before = hook.n.Load()
	tick := time.NewTicker(100 * time.Millisecond)
	stop := time.After(phase)
loop:
	for len(held) > 0 {
		select {
		case <-tick.C:
			require.NoError(t, holder.Settle(ctx, held[0], held[0].Charges))
			held = held[1:]
			f.releases++
		case <-stop:
			break loop
		}
	}
	tick.Stop()
	time.Sleep(100 * time.Millisecond)
	f.releasingCmds = hook.n.Load() - before
	f.granted = int(granted.Load())
	cancel()
	wg.Wait()
	f.quietRate = float64(f.quietCmds) / float64(n) / phase.Seconds()
	f.releasingRate = float64(f.releasingCmds) / float64(n) / (phase + 100*time.Millisecond).Seconds()
	return f
}

func (f waitingFigures) String() string {
	return fmt.Sprintf("%v: %d calls waiting on an exhausted budget (2 workers): %.4f commands per waiting call per second while nothing is released (%d in %v), %.4f while a slot is released every 100 ms (%d commands, %d releases, %d granted)",
		f.engine, f.waiters, f.quietRate, f.quietCmds, f.phase, f.releasingRate, f.releasingCmds, f.releases, f.granted)
}

// TestWaitingCallsAreQuiet: a thousand waiting calls do not poll Redis, and
// a release costs Redis a few commands per worker, not one per waiting call
// (which would be 10 per waiting call per second here), on either engine.
// The scripts wake the head of each worker's queue: one command a worker
// per release (0.019 per waiting call per second). The records engine wakes
// a batch's worth of each worker's waiters, decided in as many batches as
// they arrive in, and each batch writes the time it advanced the scope to,
// denials included, so the two workers' writes also meet: about ten
// commands per release on a quiet machine (0.074-0.125 measured), but up
// to 63 beside two other test packages (0.26 and 0.59), the woken waiters
// then arriving in more batches. Its bound while releasing is a tenth of
// one command per waiting call per release; while nothing is released,
// both engines send nothing.
func TestWaitingCallsAreQuiet(t *testing.T) {
	for _, c := range []struct {
		engine           Engine
		quiet, releasing float64 // the most commands per waiting call per second
	}{{EngineScripts, 0.1, 0.1}, {EngineRecords, 0.1, 1}} {
		t.Run(c.engine.String(), func(t *testing.T) {
			f := measureWaiting(t, c.engine, 1000, 1500*time.Millisecond)
			t.Log(f)
			require.LessOrEqual(t, f.quietRate, c.quiet)
			require.LessOrEqual(t, f.releasingRate, c.releasing)
			require.Positive(t, f.granted, "released slots reach waiters")
		})
	}
}

// BenchmarkWaitingCalls reports Redis commands per waiting call per second
// while 1,000 calls wait on an exhausted budget (one scenario per run), on
// the default engine and on the scripts.
func BenchmarkWaitingCalls(b *testing.B) {
	for _, engine := range []Engine{EngineRecords, EngineScripts} {
		b.Run("engine="+engine.String(), func(b *testing.B) {
			var f waitingFigures
			for b.Loop() {
				f = measureWaiting(b, engine, 1000, 1500*time.Millisecond)
			}
			b.ReportMetric(f.quietRate, "cmds/wait/s-quiet")
			b.ReportMetric(f.releasingRate, "cmds/wait/s-releasing")
			b.Log(f)
		})
	}
}

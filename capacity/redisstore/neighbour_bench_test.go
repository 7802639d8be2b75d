package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/redisstore"
)

// neighbourEvery is how often BenchmarkNeighbour's idle scope admits a call.
const neighbourEvery = 5 * time.Millisecond

// BenchmarkNeighbour measures what a hot scope costs the other scopes of
// its Redis, once whatever b.N (run it with -benchtime 1x): while
// BenchmarkHotScope's load runs (1,000 callers over 8 processes on one
// scope, at the default bucket and with a one-second one), this process reserves and settles one call
// every 5 ms on a second scope of the same prefix whose budget is nowhere
// near spent. Redis runs one script at a time, so every script of the hot
// scope delays the neighbour's. It reports the neighbour's Reserve latency
// (neighbour-p50-us, neighbour-p99-us, neighbour-max-us) beside the hot
// scope's grants/s and the server's CPU; it asserts nothing about time.
func BenchmarkNeighbour(b *testing.B) {
	if testing.Short() {
		b.Skip("a multi-second multi-process run")
	}
	for _, c := range scaleBursts {
		b.Run(c.name, func(b *testing.B) { benchmarkNeighbour(b, c.burst) })
	}
}

// benchmarkNeighbour is BenchmarkNeighbour with the hot scope's
// Limits.Burst set to burst (zero: the default).
func benchmarkNeighbour(b *testing.B, burst time.Duration) {
	run := scaleSetup(b, "hot", 8)
	run.burst = burst
	rdb := redis.NewClient(&redis.Options{Addr: run.addr})
	b.Cleanup(func() { _ = rdb.Close() })
	// The neighbour on the same engine as the hot scope.
	s, err := redisstore.New(rdb, redisstore.Options{Prefix: run.prefix, Engine: scaleEngine(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	scope := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o-mini", Credential: "neighbour"}
	limits := capacity.Limits{RequestsPerMinute: 60000}
	var lat []int64
	var errs int
	run.during = func(start, end time.Time) {
		ctx := context.Background()
		for i := 0; time.Now().Before(end); i++ {
			req := capacity.Request{Scope: scope, Limits: limits, Call: "n" + strconv.Itoa(i), Attempt: 1, Charges: scaleOne}
			t0 := time.Now()
			res, err := s.Reserve(ctx, req)
			lat = append(lat, time.Since(t0).Nanoseconds())
			if err != nil || !res.Granted {
				errs++
			} else if err := s.Settle(ctx, res.Lease, res.Lease.Charges); err != nil {
				errs++
			}
			time.Sleep(time.Until(t0.Add(neighbourEvery)))
		}
	}
	reps, srv := run.run(b, 0)
	if errs > 0 {
		b.Errorf("neighbour: %d of %d calls denied or failed", errs, len(lat))
	}
	var grants int64
	for _, r := range reps {
		grants += int64(len(r.Grants))
	}
	secs := run.window.Seconds()
	f := map[string]float64{
		"neighbour-p50-us": scalePercentile(lat, 50) / 1e3,
		"neighbour-p99-us": scalePercentile(lat, 99) / 1e3,
		"neighbour-max-us": scalePercentile(lat, 100) / 1e3,
		"hot-grants/s":     float64(grants) / secs,
		"redis-cpu-busy":   srv.cpu / secs,
		"slowest-cmd-us":   float64(srv.slowest.Microseconds()),
	}
	for k, v := range f {
		b.ReportMetric(v, k)
	}
	b.Logf("Neighbour (%s): one call every %v on an idle scope beside a hot scope (%d callers over %d processes, %s), %.0f s on %s",
		scaleStoreName(b), neighbourEvery, run.callers, run.procs, scaleBucket(burst), secs, run.addr)
	b.Logf("  neighbour Reserve (%d calls): p50 %.0f µs, p99 %.0f µs, max %.0f µs", len(lat), f["neighbour-p50-us"], f["neighbour-p99-us"], f["neighbour-max-us"])
	b.Logf("  hot scope: %.1f grants/s; Redis CPU busy %.1f%% of one core; longest command %v", f["hot-grants/s"], 100*f["redis-cpu-busy"], srv.slowest)
}

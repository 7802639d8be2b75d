package redisstore

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/accounting"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// benchGoroutines is the concurrency of the admission benchmarks.
const benchGoroutines = 16

// benchLimits never bind, so every iteration is a grant and a settle.
var benchLimits = capacity.Limits{
	RequestsPerMinute: 1e12, InputTokensPerMinute: 1e13, OutputTokensPerMinute: 1e13,
	TokensPerMinute: 1e13, RequestsPerDay: 1e13, TokensPerDay: 1e13, MaxInFlight: 1e9,
}

var benchScope = capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "bench"}

// countHook counts the commands a client sends (one per round trip here:
// nothing is pipelined), only those named name if it is set.
type countHook struct {
	name string
	n    atomic.Int64
}

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (h *countHook) count(cmd redis.Cmder) {
	if h.name == "" || cmd.Name() == h.name {
		h.n.Add(1)
	}
}

// admission is one benchmark's figures, kept for the side-by-side summary.
type admission struct {
	nsPerOp, p50, p99, opsPerSec, roundTrips, redisCPU float64
}

// serverCPU returns the CPU time (user + system) the Redis server has used,
// in microseconds, or -1 if INFO does not say.
func serverCPU(rdb *redis.Client) float64 {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		return -1
	}
	total, found := 0.0, 0
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return -1
			}
			total += f
			found++
		}
	}
	if found != 2 {
		return -1
	}
	return total * 1e6
}

// runAdmission runs op b.N times from benchGoroutines goroutines and reports
// the latency percentiles of timed (the part op measures) and round trips.
func runAdmission(b *testing.B, rdb *redis.Client, hook *countHook, op func(i int) (time.Duration, error)) admission {
	var next atomic.Int64
	lat := make([][]time.Duration, benchGoroutines)
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ReportAllocs()
	before := hook.n.Load()
	cpuBefore := serverCPU(rdb)
	b.ResetTimer()
	start := time.Now()
	for g := range benchGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				d, err := op(i)
				if err != nil {
					failed.Store(err)
					return
				}
				lat[g] = append(lat[g], d)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	cpuAfter := serverCPU(rdb)
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	a := admission{
		nsPerOp:    float64(elapsed.Nanoseconds()) / float64(b.N),
		p50:        float64(all[len(all)/2].Nanoseconds()),
		p99:        float64(all[len(all)*99/100].Nanoseconds()),
		opsPerSec:  float64(b.N) / elapsed.Seconds(),
		roundTrips: float64(hook.n.Load()-before) / float64(b.N),
		redisCPU:   -1,
	}
	if cpuBefore >= 0 && cpuAfter >= 0 {
		a.redisCPU = (cpuAfter - cpuBefore) / float64(b.N)
		b.ReportMetric(a.redisCPU*1e3, "redis-cpu-ns/op")
	}
	b.ReportMetric(a.p50, "p50-ns")
	b.ReportMetric(a.p99, "p99-ns")
	b.ReportMetric(a.opsPerSec, "ops/s")
	b.ReportMetric(a.roundTrips, "roundtrips/op")
	return a
}

// benchAddr returns a redis-server of the benchmark's own when one can be
// started (a shared server's Lua heap, grown by other scripts, slows every
// script down), else the test Redis.
func benchAddr(b *testing.B) string {
	if _, err := exec.LookPath("redis-server"); err == nil {
		return testenv.StartRedisServer(b, "").Addr()
	}
	return redisAddr()
}

// benchClient returns a client on addr with a command counter.
func benchClient(b *testing.B, addr string) (*redis.Client, *countHook) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	b.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		b.Skip("no Redis at " + addr)
	}
	hook := &countHook{}
	rdb.AddHook(hook)
	return rdb, hook
}

// admitOp is one admitted call of a benchmark: it returns the latency of
// the part that admits (the reserve) and any error.
type admitOp func(i int) (time.Duration, error)

// reserveSettleOp returns an op that reserves and settles one call on one
// hot scope of a new store on rdb; with observe, it also observes the
// response's headers after the settle, as the activity interceptor does
// for every call whose response carried rate-limit headers.
func reserveSettleOp(b *testing.B, rdb *redis.Client, observe bool) admitOp {
	s, err := New(rdb, Options{Engine: EngineScripts, Prefix: testPrefix(b, rdb)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	p := accounting.OpenAIProfile{}
	d := capacity.Demand{InputTokens: 800, MaxTokens: 256}
	charges := p.Charges(d)
	ctx := context.Background()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	var obs capacity.Observation
	obs.Dims[capacity.Requests] = capacity.DimensionObservation{HasLimit: true, Limit: 1e9, HasRemaining: true, Remaining: 1e9}
	obs.Dims[capacity.Tokens] = capacity.DimensionObservation{HasLimit: true, Limit: 1e12, HasRemaining: true, Remaining: 1e12}
	return func(i int) (time.Duration, error) {
		t0 := time.Now()
		res, err := s.Reserve(ctx, capacity.Request{Scope: benchScope, Limits: benchLimits, Call: run + "-" + strconv.Itoa(i), Attempt: 1, Charges: charges, TTL: time.Minute})
		lat := time.Since(t0)
		if err != nil {
			return 0, err
		}
		if !res.Granted {
			return 0, fmt.Errorf("denied: %v on %v", res.Reason, res.Binding)
		}
		final := p.Settle(d, res.Lease.Charges, accounting.Completed, capacity.Usage{InputTokens: 790, OutputTokens: 120})
		if err := s.Settle(ctx, res.Lease, final); err != nil || !observe {
			return lat, err
		}
		o := obs
		o.Mark = res.Lease.Mark
		return lat, s.Observe(ctx, benchScope, o)
	}
}

// BenchmarkAdmissionObserved measures a whole admitted call as the
// interceptor makes it, reserve, settle and observe, with 16 goroutines on
// one scope (not a target's setup: for the README's production figure).
func BenchmarkAdmissionObserved(b *testing.B) {
	addr := benchAddr(b)
	rdb, hook := benchClient(b, addr)
	runAdmission(b, rdb, hook, reserveSettleOp(b, rdb, true))
}

// allowNOp returns an op that admits one call with go-redis/redis_rate
// AllowN on rdb: the single-bucket limiter tollgate is compared with.
func allowNOp(b *testing.B, rdb *redis.Client) admitOp {
	limiter := redis_rate.NewLimiter(rdb)
	key := testPrefix(b, rdb)
	b.Cleanup(func() { rdb.Del(context.Background(), "rate:"+key) })
	limit := redis_rate.PerSecond(1 << 30)
	ctx := context.Background()
	return func(int) (time.Duration, error) {
		t0 := time.Now()
		res, err := limiter.AllowN(ctx, key, limit, 1)
		lat := time.Since(t0)
		if err != nil {
			return 0, err
		}
		if res.Allowed != 1 {
			return 0, fmt.Errorf("redis_rate denied")
		}
		return lat, nil
	}
}

// benchReserveSettle measures one admission and its settlement on one hot
// scope (reserve latency is what p50/p99 report).
func benchReserveSettle(b *testing.B, addr string) admission {
	rdb, hook := benchClient(b, addr)
	return runAdmission(b, rdb, hook, reserveSettleOp(b, rdb, false))
}

// benchAllowN measures go-redis/redis_rate AllowN on the same server.
func benchAllowN(b *testing.B, addr string) admission {
	rdb, hook := benchClient(b, addr)
	return runAdmission(b, rdb, hook, allowNOp(b, rdb))
}

// runFor runs op from benchGoroutines goroutines for d and returns the
// calls completed.
func runFor(d time.Duration, op admitOp, next *atomic.Int64) (int64, error) {
	deadline := time.Now().Add(d)
	var done atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range benchGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if _, err := op(int(next.Add(1))); err != nil {
					failed.Store(err)
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	err, _ := failed.Load().(error)
	return done.Load(), err
}

// interleaved runs both ops in alternating slices of equal length, so a
// machine whose speed drifts (other tenants, CPU frequency) slows both
// alike, and returns each one's calls per second.
func interleaved(b *testing.B, addr string, slices int, slice time.Duration) (ours, theirs float64) {
	rdb, _ := benchClient(b, addr)
	opOurs, opTheirs := reserveSettleOp(b, rdb, false), allowNOp(b, rdb)
	var next atomic.Int64
	var nOurs, nTheirs int64
	for i := range slices {
		// Alternate which goes first, too.
		first, second, nf, ns := opOurs, opTheirs, &nOurs, &nTheirs
		if i%2 == 1 {
			first, second, nf, ns = opTheirs, opOurs, &nTheirs, &nOurs
		}
		for _, x := range []struct {
			op admitOp
			n  *int64
		}{{first, nf}, {second, ns}} {
			n, err := runFor(slice, x.op, &next)
			if err != nil {
				b.Fatal(err)
			}
			*x.n += n
		}
	}
	total := (time.Duration(slices) * slice).Seconds()
	return float64(nOurs) / total, float64(nTheirs) / total
}

// BenchmarkAdmission runs reserve+settle on this store beside redis_rate's
// AllowN on the same loopback Redis, 16 goroutines each, and prints the
// comparison: ns/op and ops/s are per admitted call (reserve and settle),
// p50/p99 the reserve's latency, roundtrips/op the commands sent per call.
func BenchmarkAdmission(b *testing.B) {
	addr := benchAddr(b)
	var ours, theirs admission
	b.Run("redisstore-reserve-settle", func(b *testing.B) { ours = benchReserveSettle(b, addr) })
	b.Run("redis_rate-AllowN", func(b *testing.B) { theirs = benchAllowN(b, addr) })
	if ours.p50 == 0 || theirs.p50 == 0 {
		return
	}
	b.Logf("reserve p50 %.0f µs = %.2f× AllowN p50 %.0f µs (target <= 2); p99 %.0f µs vs %.0f µs; %.0f vs %.0f ns/op",
		ours.p50/1e3, ours.p50/theirs.p50, theirs.p50/1e3, ours.p99/1e3, theirs.p99/1e3, ours.nsPerOp, theirs.nsPerOp)
	b.Logf("reserve+settle %.0f/s = %.2f× AllowN %.0f/s (target >= 0.5); %.2f round trips per admitted call (target <= 2)",
		ours.opsPerSec, ours.opsPerSec/theirs.opsPerSec, theirs.opsPerSec, ours.roundTrips)
	b.Logf("Redis CPU per admitted call %.1f µs vs %.1f µs per AllowN", ours.redisCPU, theirs.redisCPU)
	o, t := interleaved(b, addr, 8, 250*time.Millisecond)
	b.Logf("interleaved (8 alternating 250 ms slices each): reserve+settle %.0f/s = %.2f× AllowN %.0f/s (target >= 0.5)", o, o/t, t)
}

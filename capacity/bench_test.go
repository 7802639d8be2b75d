package capacity_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/accounting"
)

// benchLimits never bind, so every iteration is a grant and a settle.
var benchLimits = capacity.Limits{
	RequestsPerMinute: 1e12, InputTokensPerMinute: 1e15, OutputTokensPerMinute: 1e15,
	TokensPerMinute: 1e15, RequestsPerDay: 1e15, TokensPerDay: 1e15, MaxInFlight: 1e9,
}

func benchCalls(n int) []string {
	calls := make([]string, n)
	for i := range calls {
		calls[i] = "wf-" + strconv.Itoa(i)
	}
	return calls
}

// BenchmarkReserveSettle measures one admission and its settlement on one hot
// scope: Reserve, then Settle with actual usage.
func BenchmarkReserveSettle(b *testing.B) {
	store := capacity.NewMemoryStore(capacity.MemoryOptions{})
	p := accounting.OpenAIProfile{}
	d := capacity.Demand{InputTokens: 800, MaxTokens: 256}
	charges := p.Charges(d)
	calls := benchCalls(1 << 16)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		res, err := store.Reserve(ctx, capacity.Request{Scope: propScope, Limits: benchLimits, Call: calls[i&(1<<16-1)], Attempt: 1 + i>>16, Charges: charges, TTL: time.Minute})
		if err != nil || !res.Granted {
			b.Fatal(err, res.Reason)
		}
		if err := store.Settle(ctx, res.Lease, p.Settle(d, res.Lease.Charges, accounting.Completed, capacity.Usage{InputTokens: 790, OutputTokens: 120})); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReserveSettleParallel is BenchmarkReserveSettle from 8 goroutines
// (at least; RunParallel runs a multiple of GOMAXPROCS) on the same scope.
func BenchmarkReserveSettleParallel(b *testing.B) {
	store := capacity.NewMemoryStore(capacity.MemoryOptions{})
	p := accounting.OpenAIProfile{}
	d := capacity.Demand{InputTokens: 800, MaxTokens: 256}
	charges := p.Charges(d)
	calls := benchCalls(1 << 16)
	var seq atomic.Int64
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism((8 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(seq.Add(1))
			res, err := store.Reserve(ctx, capacity.Request{Scope: propScope, Limits: benchLimits, Call: calls[i&(1<<16-1)], Attempt: 1 + i>>16, Charges: charges, TTL: time.Minute})
			if err != nil || !res.Granted {
				b.Error(err, res.Reason)
				return
			}
			if err := store.Settle(ctx, res.Lease, p.Settle(d, res.Lease.Charges, accounting.Completed, capacity.Usage{InputTokens: 790, OutputTokens: 120})); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkReports measures a provider's report (Observe) with n leases in
// flight, carrying the mark of a lease granted halfway: what the leases
// granted before it hold is walked while at most 16 are live, and read from
// sums by grant number past them (livesums.go), so the cost stays flat.
func BenchmarkReports(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run("inflight="+strconv.Itoa(n), func(b *testing.B) {
			store := capacity.NewMemoryStore(capacity.MemoryOptions{})
			ctx := context.Background()
			var mark capacity.Mark
			for i, call := range benchCalls(n) {
				res, err := store.Reserve(ctx, capacity.Request{Scope: propScope, Limits: benchLimits, Call: call, Attempt: 1, TTL: time.Hour,
					Charges: capacity.Charges{capacity.Requests: 1, capacity.Tokens: 1000, capacity.InFlight: 1}})
				if err != nil || !res.Granted {
					b.Fatal(err, res.Reason)
				}
				if i == n/2 {
					mark = res.Lease.Mark
				}
			}
			var o capacity.Observation
			o.Dims[capacity.Tokens] = capacity.DimensionObservation{HasLimit: true, Limit: 1e15, HasRemaining: true, Remaining: 1e14}
			o.Mark = mark
			b.ReportAllocs()
			for b.Loop() {
				if err := store.Observe(ctx, propScope, o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSummary measures the memory store's Summary of a scope with n
// leases in flight: what a pooled call reads of each member, and the
// budget gauges of every scope.
func BenchmarkSummary(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run("inflight="+strconv.Itoa(n), func(b *testing.B) {
			store := capacity.NewMemoryStore(capacity.MemoryOptions{})
			ctx := context.Background()
			for _, call := range benchCalls(n) {
				res, err := store.Reserve(ctx, capacity.Request{Scope: propScope, Limits: benchLimits, Call: call, Attempt: 1, TTL: time.Hour,
					Charges: capacity.Charges{capacity.Requests: 1, capacity.Tokens: 1000, capacity.InFlight: 1}})
				if err != nil || !res.Granted {
					b.Fatal(err, res.Reason)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := store.Summary(ctx, propScope, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

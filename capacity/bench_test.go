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

package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/tollgate-dev/tollgate/capacity"
)

// BenchmarkRetime measures what moving booked tickets costs: with n
// tickets booked on a scope, each iteration books one more and releases it,
// and the release's refund retimes the first tuning.RetimeWindow tickets
// (lua/rules.lua, retime), so the cost does not grow with n (until scripts
// 5.3 it retimed every ticket: decision 0007). A debt, a refund or a
// report that moves tickets pays the same; a settle that charges what it
// reserved pays nothing.
func BenchmarkRetime(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("tickets=%d", n), func(b *testing.B) {
			s, _ := newTestStore(b, Options{Engine: EngineScripts})
			ctx := context.Background()
			l := capacity.Limits{TokensPerMinute: 60000, SafetyMargin: 1, Burst: time.Second} // 1,000 tokens/s
			sc := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "m", Credential: "retime"}
			req := func(call string) capacity.Request {
				return capacity.Request{Scope: sc, Limits: l, Call: call, Attempt: 1, Book: true,
					Charges: capacity.Charges{capacity.Tokens: 100, capacity.InFlight: 1}}
			}
			for i := range n + 10 { // the first ten fill the bucket
				if _, err := s.Reserve(ctx, req(fmt.Sprint("held-", i))); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				r := req(fmt.Sprint("moving-", i))
				res, err := s.Reserve(ctx, r)
				if err != nil || !res.Booked {
					b.Fatalf("booking: %v %+v", err, res)
				}
				if err := s.Release(ctx, capacity.Lease{Scope: sc, Call: r.Call}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReportRaises measures reports that move the level: with n
// tickets booked, each iteration reports a provider bucket emptied by
// another client (a lower level: the first tuning.RetimeWindow tickets
// move back), then one refilled (a higher level: they move forward; until
// scripts 6.0 every ticket did, and the cost grew with n).
func BenchmarkReportRaises(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("tickets=%d", n), func(b *testing.B) {
			s, _ := newTestStore(b, Options{Engine: EngineScripts})
			ctx := context.Background()
			l := capacity.Limits{TokensPerMinute: 60000, SafetyMargin: 1, Burst: time.Second} // 1,000 tokens/s
			sc := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "m", Credential: "raise"}
			for i := range n + 10 { // the first ten fill the bucket
				_, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: fmt.Sprint("held-", i), Attempt: 1, Book: true,
					Charges: capacity.Charges{capacity.Tokens: 100, capacity.InFlight: 1}})
				if err != nil {
					b.Fatal(err)
				}
			}
			report := func(remaining int64) capacity.Observation {
				var o capacity.Observation
				o.Dims[capacity.Tokens] = capacity.DimensionObservation{HasLimit: true, Limit: 60000, HasRemaining: true, Remaining: remaining}
				return o
			}
			b.ResetTimer()
			for range b.N {
				for _, remaining := range []int64{0, 60000} {
					if err := s.Observe(ctx, sc, report(remaining)); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkSnapshot measures Store.Snapshot and Store.Summary of a scope
// with n tickets booked and ten leases in flight. A snapshot lists every
// lease and ticket, so its cost grows with n; a summary (what a pooled
// call reads of each member on every attempt, and the budget gauges of
// each MetricsInterval) does not.
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		s, _ := newTestStore(b, Options{Engine: EngineScripts})
		ctx := context.Background()
		l := capacity.Limits{TokensPerMinute: 60000, SafetyMargin: 1, Burst: time.Second} // 1,000 tokens/s
		sc := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "m", Credential: "snapshot"}
		for i := range n + 10 { // the first ten fill the bucket
			_, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: fmt.Sprint("held-", i), Attempt: 1, Book: true,
				Charges: capacity.Charges{capacity.Tokens: 100, capacity.InFlight: 1}})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("snapshot,tickets=%d", n), func(b *testing.B) {
			for range b.N {
				snap, err := s.Snapshot(ctx, sc)
				if err != nil || len(snap.Tickets) != n {
					b.Fatal(err, len(snap.Tickets))
				}
			}
		})
		b.Run(fmt.Sprintf("summary,tickets=%d", n), func(b *testing.B) {
			for range b.N {
				sum, err := s.Summary(ctx, sc, "held-15")
				if err != nil || sum.Booked != n || !sum.HoldsTicket {
					b.Fatal(err, sum.Booked, sum.HoldsTicket)
				}
			}
		})
	}
}

// BenchmarkBookings measures what a booking costs Redis with n tickets
// already booked: each iteration's reserve books a ticket at the back of
// the queue, sent by 32 callers at once as a busy scope's callers send them
// (so in batches of up to maxBatch). It reports the scripts' Redis time per
// booking (INFO commandstats) and the longest script call (SLOWLOG).
func BenchmarkBookings(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("tickets=%d", n), func(b *testing.B) {
			s, rdb := newTestStore(b, Options{Engine: EngineScripts})
			ctx := context.Background()
			l := capacity.Limits{RequestsPerMinute: 12000} // BenchmarkHotScope's, at the default bucket
			sc := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "m", Credential: "bookings"}
			book := func(prefix string, count int) {
				var g errgroup.Group
				g.SetLimit(32)
				for i := range count {
					g.Go(func() error {
						res, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: fmt.Sprint(prefix, i), Attempt: 1, Book: true,
							Charges: capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}})
						if err == nil && !res.Granted && !res.Booked {
							err = fmt.Errorf("not booked: %+v", res)
						}
						return err
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
			}
			book("held-", n+1000) // the first thousand fill the bucket
			for _, kv := range [][2]string{{"slowlog-log-slower-than", "0"}, {"slowlog-max-len", "1024"}} {
				require.NoError(b, rdb.ConfigSet(ctx, kv[0], kv[1]).Err())
			}
			require.NoError(b, rdb.Do(ctx, "SLOWLOG", "RESET").Err())
			before := fcallMicros(b, rdb)
			b.ResetTimer()
			book("booking-", b.N)
			b.StopTimer()
			b.ReportMetric(float64(fcallMicros(b, rdb)-before)/float64(b.N), "redis-us/booking")
			logs, err := rdb.SlowLogGet(ctx, 1024).Result()
			require.NoError(b, err)
			var longest time.Duration
			for _, e := range logs {
				if len(e.Args) > 0 && strings.EqualFold(e.Args[0], "fcall") {
					longest = max(longest, e.Duration)
				}
			}
			b.ReportMetric(float64(longest.Microseconds()), "longest-script-us")
		})
	}
}

// fcallMicros is the Redis time every FCALL took so far (INFO commandstats).
func fcallMicros(b *testing.B, rdb *redis.Client) int64 {
	stats, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(b, err)
	for line := range strings.SplitSeq(stats, "\r\n") {
		v, ok := strings.CutPrefix(line, "cmdstat_fcall:")
		if !ok {
			continue
		}
		for kv := range strings.SplitSeq(v, ",") {
			if us, ok := strings.CutPrefix(kv, "usec="); ok {
				n, err := strconv.ParseInt(us, 10, 64)
				require.NoError(b, err)
				return n
			}
		}
	}
	return 0
}

// BenchmarkReports measures what a provider's report costs Redis with n
// leases in flight: each iteration reports a token bucket's remaining with
// the mark of a lease granted halfway, sent by 16 callers at once as a busy
// scope's settles send them (so in batches). observe needs what the leases
// granted before the reported one still hold (lua/rules.lua, observe). It
// reports the scripts' Redis time per report (INFO commandstats) and the
// longest script call (SLOWLOG).
func BenchmarkReports(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("inflight=%d", n), func(b *testing.B) {
			s, rdb := newTestStore(b, Options{Engine: EngineScripts})
			ctx := context.Background()
			l := capacity.Limits{TokensPerMinute: 1 << 40, RequestsPerMinute: 1 << 30}
			sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "m", Credential: "reports"}
			marks := make([]capacity.Mark, n)
			for i := range n {
				res, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: fmt.Sprint("held-", i), Attempt: 1,
					Charges: capacity.Charges{capacity.Requests: 1, capacity.Tokens: 1000, capacity.InFlight: 1}, TTL: time.Hour})
				if err != nil || !res.Granted {
					b.Fatalf("grant: %v %+v", err, res)
				}
				marks[i] = res.Lease.Mark
			}
			var o capacity.Observation
			o.Dims[capacity.Tokens] = capacity.DimensionObservation{HasLimit: true, Limit: 1 << 40, HasRemaining: true, Remaining: 1 << 39}
			o.Mark = marks[n/2]
			for _, kv := range [][2]string{{"slowlog-log-slower-than", "0"}, {"slowlog-max-len", "1024"}} {
				require.NoError(b, rdb.ConfigSet(ctx, kv[0], kv[1]).Err())
			}
			require.NoError(b, rdb.Do(ctx, "SLOWLOG", "RESET").Err())
			before := fcallMicros(b, rdb)
			b.ResetTimer()
			var g errgroup.Group
			g.SetLimit(16)
			for range b.N {
				g.Go(func() error { return s.Observe(ctx, sc, o) })
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(fcallMicros(b, rdb)-before)/float64(b.N), "redis-us/report")
			logs, err := rdb.SlowLogGet(ctx, 1024).Result()
			require.NoError(b, err)
			var longest time.Duration
			for _, e := range logs {
				if len(e.Args) > 0 && strings.EqualFold(e.Args[0], "fcall") {
					longest = max(longest, e.Duration)
				}
			}
			b.ReportMetric(float64(longest.Microseconds()), "longest-script-us")
		})
	}
}

package redisstore

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/tollgate-dev/tollgate/capacity"
)

// BenchmarkTenants measures what a booking costs Redis with n tenants
// (fairness keys) waiting on one scope, each with a ticket booked, so that
// every flow is ahead of its rank's virtual time: each iteration books one
// more call of one of them, sent by 32 callers at once. It reports the
// scripts' Redis time per booking (INFO commandstats) and the longest
// script call (SLOWLOG).
func BenchmarkTenants(b *testing.B) {
	for _, n := range []int{100, 1000, 2000} {
		b.Run(fmt.Sprintf("tenants=%d", n), func(b *testing.B) {
			s, rdb := newTestStore(b, Options{Engine: EngineScripts})
			ctx := context.Background()
			l := capacity.Limits{RequestsPerMinute: 600}
			sc := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "m", Credential: "tenants"}
			book := func(prefix string, count int) {
				var g errgroup.Group
				g.SetLimit(32)
				for i := range count {
					g.Go(func() error {
						res, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: fmt.Sprint(prefix, i), Attempt: 1, Book: true,
							Charges: capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}, Fairness: capacity.Fairness{Key: fmt.Sprint("tenant-", i%n)}})
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
			book("held-", n+50) // the first fifty fill the bucket
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
			var longest int64
			for _, e := range logs {
				if len(e.Args) > 0 && strings.EqualFold(e.Args[0], "fcall") {
					longest = max(longest, e.Duration.Microseconds())
				}
			}
			b.ReportMetric(float64(longest), "longest-script-us")
		})
	}
}

package redisstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
)

// BenchmarkLapses measures the scripts that find n tickets lapsed, or n
// leases expired, at once, as after a worker that held them crashed. Each
// iteration books or grants n, moves the clock past their expiry and makes
// one call, which reclaims them: tuning.MaxReclaim a script (lua/rules.lua,
// reclaimTickets and reclaimLeases), the call's batch sent again until
// none is left (until scripts 6.3, one script reclaimed them all). It
// reports that call's scripts (SLOWLOG, those over 100 µs): their Redis
// time in all, the longest and how many ran.
func BenchmarkLapses(b *testing.B) {
	for _, kind := range []string{"tickets", "leases"} {
		for _, n := range []int{100, 1000} {
			b.Run(fmt.Sprintf("%s=%d", kind, n), func(b *testing.B) {
				clock := capacitytest.NewManualClock(time.Now().Truncate(time.Second))
				s, rdb := newTestStore(b, Options{Engine: EngineScripts, Clock: clock})
				ctx := context.Background()
				l := capacity.Limits{RequestsPerMinute: 600} // 50 at once: the rest book
				if kind == "leases" {
					l = capacity.Limits{RequestsPerMinute: 600_000_000}
				}
				one := capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}
				// Above 100 µs: SLOWLOG also lists the commands a script
				// calls, and a reclaim's thousands of them, each a few µs,
				// would push its scripts out of the log.
				require.NoError(b, rdb.ConfigSet(ctx, "slowlog-log-slower-than", "100").Err())
				require.NoError(b, rdb.ConfigSet(ctx, "slowlog-max-len", "4096").Err())
				var total, longest time.Duration
				scripts := 0
				for i := range b.N {
					sc := capacity.Scope{Provider: capacity.Anthropic, LimitGroup: "m", Credential: fmt.Sprint("lapses-", i)}
					for j := range n + 50 {
						_, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: fmt.Sprint("c", j), Attempt: 1, Book: true,
							TTL: time.Minute, Charges: one})
						require.NoError(b, err)
					}
					clock.Advance(time.Hour)
					require.NoError(b, rdb.Do(ctx, "SLOWLOG", "RESET").Err())
					_, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: l, Call: "next", Attempt: 1, Book: true, Charges: one})
					require.NoError(b, err)
					logs, err := rdb.SlowLogGet(ctx, 4096).Result()
					require.NoError(b, err)
					for _, e := range logs {
						if len(e.Args) > 0 && strings.EqualFold(e.Args[0], "fcall") {
							total += e.Duration
							longest = max(longest, e.Duration)
							scripts++
						}
					}
				}
				b.ReportMetric(float64(total.Microseconds())/float64(b.N), "script-us")
				b.ReportMetric(float64(longest.Microseconds()), "longest-us")
				b.ReportMetric(float64(scripts)/float64(b.N), "scripts")
			})
		}
	}
}

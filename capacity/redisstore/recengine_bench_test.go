package redisstore

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/tollgate-dev/tollgate/capacity"
)

// BenchmarkRecordsCall is one worker's reserve and settle over a thousand
// scopes on the records engine, for profiling the worker's side
// (BenchmarkManyScopes measures the store across processes).
func BenchmarkRecordsCall(b *testing.B) {
	rdb := testClient(b)
	s := newRecordsStore(b, rdb, testPrefix(b, rdb), nil)
	lim := capacity.Limits{RequestsPerMinute: 6000}
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			i := n.Add(1)
			sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "m" + strconv.FormatInt(i%1000, 10), Credential: "c0"}
			res, err := s.Reserve(ctx, capacity.Request{Scope: sc, Limits: lim, Charges: capacity.Charges{capacity.Requests: 1},
				Call: "c" + strconv.FormatInt(i, 10), Attempt: 1})
			if err != nil || !res.Granted {
				b.Fatal(err, res.Reason)
			}
			if err := s.Settle(ctx, res.Lease, res.Lease.Charges); err != nil {
				b.Fatal(err)
			}
		}
	})
}

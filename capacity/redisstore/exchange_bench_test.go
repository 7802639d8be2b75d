package redisstore

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity"
)

// exchangeBehind is how many writes the copy of BenchmarkExchangeRead
// missed: about what a copy misses over many scopes (BenchmarkManyScopes).
const exchangeBehind = 15

// BenchmarkExchangeRead measures what a read of a scope costs Redis, for a
// copy exchangeBehind writes behind on a scope of the many-scopes shape
// (one call's reserve and settle a write): lua/exchange.lua's read
// ("script"), and the same commands without a script, in a MULTI/EXEC
// ("multi"), which the records engine does not send (docs/performance.md).
// It reports Redis's CPU per read (redis-cpu-ns/op) and the benchmark's
// own, the client's (client-cpu-ns/op), on a redis-server of its own where
// one can be started, reads pipelined 50 at a time.
func BenchmarkExchangeRead(b *testing.B) {
	rdb, _ := benchClient(b, benchAddr(b))
	ctx := context.Background()
	w := newRecordsStore(b, rdb, testPrefix(b, rdb), nil)
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "m", Credential: "read"}
	lim := capacity.Limits{RequestsPerMinute: 6000, MaxInFlight: 4}
	for i := range 2 * exchangeBehind {
		res, err := w.Reserve(ctx, capacity.Request{Scope: sc, Limits: lim, Charges: capacity.Charges{capacity.Requests: 1},
			Call: "c" + strconv.Itoa(i), Attempt: 1})
		if err != nil || !res.Granted {
			b.Fatal(err, res.Reason)
		}
		if err := w.Settle(ctx, res.Lease, res.Lease.Charges); err != nil {
			b.Fatal(err)
		}
	}
	keys := w.rec.scope(sc).keys
	v, err := rdb.HGet(ctx, keys[0], "v").Int64()
	if err != nil {
		b.Fatal(err)
	}
	read := recArgs{have: v - exchangeBehind, credHave: 0, what: "read"}
	script := read.command(nil, recCommandHead(keys), keys).cmd
	// Each queues one read on p, and returns the command whose reply
	// answers it; the script's as recPipe reads it.
	queue := map[string]func(p redis.Pipeliner) redis.Cmder{
		"script": func(p redis.Pipeliner) redis.Cmder {
			cmd := redis.NewStringSliceCmd(ctx, script...)
			_ = p.Process(ctx, cmd)
			return cmd
		},
		"multi": func(p redis.Pipeliner) redis.Cmder {
			p.Do(ctx, "multi")
			p.Do(ctx, "hmget", keys[0], "v", "b", "t")
			p.Do(ctx, "hmget", keys[2], "v", "b")
			p.Do(ctx, "exists", keys[4])
			p.Do(ctx, "time")
			p.Do(ctx, "lrange", keys[1], -exchangeBehind, -1)
			return p.Do(ctx, "exec")
		},
	}
	for _, name := range []string{"script", "multi"} {
		b.Run(name, func(b *testing.B) {
			const batch = 50
			cpu0, self0 := serverCPU(rdb), ProcessCPU()
			for done := 0; done < b.N; done += batch {
				p := rdb.Pipeline()
				var last redis.Cmder
				for range min(batch, b.N-done) {
					last = queue[name](p)
				}
				if _, err := p.Exec(ctx); err != nil {
					b.Fatal(err)
				}
				if name == "script" {
					raw, err := last.(*redis.StringSliceCmd).Result()
					if err != nil {
						b.Fatal(err)
					}
					m, err := parseMissed(raw)
					if err != nil || m.mode != "log" || len(m.body) != exchangeBehind {
						b.Fatalf("a read of %d writes missed: mode %q, %d entries (%v)", exchangeBehind, m.mode, len(m.body), err)
					}
				}
			}
			b.ReportMetric(float64(ProcessCPU()-self0)/float64(b.N), "client-cpu-ns/op")
			if cpu1 := serverCPU(rdb); cpu0 >= 0 && cpu1 >= 0 {
				b.ReportMetric((cpu1-cpu0)*1e3/float64(b.N), "redis-cpu-ns/op")
			}
		})
	}
}

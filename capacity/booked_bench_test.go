package capacity_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
)

// BenchmarkBookedTickets measures the memory store's decisions on a scope
// with n booked tickets: each iteration claims the ticket at the head (the
// clock set to its time), settles its lease and books a new ticket at the
// back, so n stay booked. A settle that charges what it reserved moves no
// ticket; one with a request of debt (settle=debt) pushes every ticket back
// and retimes them. ns/op is one claim, one settle and one booking.
func BenchmarkBookedTickets(b *testing.B) {
	for _, settle := range []string{"exact", "debt"} {
		for _, n := range []int{100, 1_000, 10_000} {
			b.Run(fmt.Sprintf("settle=%s,tickets=%d", settle, n), func(b *testing.B) {
				benchmarkBookedTickets(b, n, settle == "debt")
			})
		}
	}
}

func benchmarkBookedTickets(b *testing.B, n int, debt bool) {
	clock := capacitytest.NewManualClock(time.Unix(1_800_000_000, 0))
	store := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock, TicketGrace: time.Hour})
	ctx := context.Background()
	limits := capacity.Limits{RequestsPerMinute: 60, SafetyMargin: 1, Burst: time.Second} // 1/s, capacity 1
	one := capacity.Charges{capacity.Requests: 1}
	req := func(call string) capacity.Request {
		return capacity.Request{Scope: bookedScope, Limits: limits, Call: call, Attempt: 1, Charges: one, Book: true, TTL: time.Hour}
	}
	var reserves int
	reserve := func(call string) capacity.Reservation {
		reserves++
		res, err := store.Reserve(ctx, req(call))
		if err != nil {
			b.Fatal(err)
		}
		return res
	}
	first := reserve("first")
	if !first.Granted {
		b.Fatal("the first call is not granted")
	}
	queue := make([]string, 0, n)
	next := 0
	book := func() {
		call := "t" + strconv.Itoa(next)
		next++
		if res := reserve(call); !res.Booked {
			b.Fatalf("%s: not booked: %+v", call, res)
		}
		queue = append(queue, call)
	}
	for range n {
		book()
	}
	used := one
	if debt {
		used[capacity.Requests] = 2
	}
	reserves = 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		head := queue[0]
		queue = queue[1:]
		res := reserve(head)
		for !res.Granted {
			if res.RetryAt.IsZero() || !res.Booked {
				b.Fatalf("%s: denied without a ticket: %+v", head, res)
			}
			clock.Set(res.RetryAt)
			res = reserve(head)
		}
		if err := store.Settle(ctx, res.Lease, used); err != nil {
			b.Fatal(err)
		}
		book()
	}
	b.ReportMetric(float64(reserves)/float64(b.N), "reserves/op")
}

var bookedScope = capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "booked"}

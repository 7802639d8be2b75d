package capacity_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/accounting"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
)

// A memory store grants what the budget holds, says when the next call
// fits, and takes back what a call did not use when it settles.
func ExampleNewMemoryStore() {
	clock := capacitytest.NewManualClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	store := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
	ctx := context.Background()

	scope := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-a"}
	// 60,000 tokens a minute: 1,000 a second, 5,000 at once (the default
	// 5 s bucket), all of it used.
	limits := capacity.Limits{TokensPerMinute: 60_000, SafetyMargin: 1}
	profile := accounting.OpenAIProfile{}
	demand := capacity.Demand{InputTokens: 1_000, MaxTokens: 2_000} // OpenAI charges max_tokens up front

	reserve := func(call string) capacity.Reservation {
		res, err := store.Reserve(ctx, capacity.Request{Scope: scope, Limits: limits, Call: call, Attempt: 1, Charges: profile.Charges(demand)})
		if err != nil {
			panic(err)
		}
		return res
	}
	first := reserve("call-1")
	second := reserve("call-2")
	fmt.Println("first granted:", first.Granted)
	fmt.Println("second granted:", second.Granted, "- fits in", second.RetryAt.Sub(second.Now))

	// The first call used 1,000 input and 300 output tokens: OpenAI does
	// not refund unused max_tokens, so the charge stands.
	final := profile.Settle(demand, first.Lease.Charges, accounting.Completed, capacity.Usage{InputTokens: 1_000, OutputTokens: 300})
	if err := store.Settle(ctx, first.Lease, final); err != nil {
		panic(err)
	}
	clock.Advance(time.Second)
	fmt.Println("after a second, second granted:", reserve("call-2").Granted)
	// Output:
	// first granted: true
	// second granted: false - fits in 1s
	// after a second, second granted: true
}

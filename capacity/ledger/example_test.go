package ledger_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/capacity/ledger"
)

// A ledger records each settled call once per lease and answers what a
// tenant and a connection spent in a day.
func ExampleNewMemory() {
	ctx := context.Background()
	clock := capacitytest.NewManualClock(time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC))
	costs := ledger.NewMemory(clock)
	scope := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "team-a"}
	day, _ := ledger.Day(clock.Now(), capacity.DayBoundary{})
	e := ledger.Entry{Lease: "summarize-42#1", Day: day, Scope: scope, Tenant: "acme",
		Tokens: ledger.Tokens{Input: 1200, Output: 300}, Cost: 0.006}
	first, _ := costs.Record(ctx, e)
	again, _ := costs.Record(ctx, e) // a retried record of the same lease
	spent, _ := costs.Spent(ctx, day, "acme", scope.CredentialKey())
	fmt.Println(day, first, again, spent.Tenant, spent.Connection)
	// Output: 2026-10-15 true false 0.006 0.006
}

package interceptor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
)

// TestUserClassAgesOnTheWorkersClock: with Options.Classes the request
// carries the class's rule aged from the call's first scheduling to the
// worker's now: a batch call waiting past its AgingAfter ranks and is
// floored as the next rank's class, at its own weight, while its Class
// still names batch.
func TestUserClassAgesOnTheWorkersClock(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	o, err := Options{
		Store:  capacity.NewMemoryStore(capacity.MemoryOptions{}),
		Limits: func(capacity.Scope) (capacity.Limits, bool) { return capacity.Limits{}, true },
		Clock:  capacitytest.NewManualClock(t0),
		Classes: []capacity.ClassDef{
			{Name: "premium", Rank: 3},
			{Name: "standard", Rank: 1, Floor: 0.1, AgingAfter: time.Hour},
			{Name: "batch", Rank: 0, Weight: 0.5, Floor: 0.3, AgingAfter: time.Hour},
		},
	}.withDefaults()
	require.NoError(t, err)
	for _, tc := range []struct {
		name      string
		scheduled time.Time
		want      capacity.ClassRule
	}{
		{"just scheduled", t0, capacity.ClassRule{Rank: 0, Floor: 0.3, Weight: 0.5}},
		{"waited less than AgingAfter", t0.Add(-59 * time.Minute), capacity.ClassRule{Rank: 0, Floor: 0.3, Weight: 0.5}},
		{"waited AgingAfter: standard's rank and floor", t0.Add(-time.Hour), capacity.ClassRule{Rank: 1, Floor: 0.1, Weight: 0.5}},
		{"waited twice that: premium's", t0.Add(-2 * time.Hour), capacity.ClassRule{Rank: 3, Weight: 0.5}},
		{"no scheduled time: no aging", time.Time{}, capacity.ClassRule{Rank: 0, Floor: 0.3, Weight: 0.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &gatedCall{opts: &o, info: activity.Info{ScheduledTime: tc.scheduled, Attempt: 1},
				call: Call{Class: 2, ClassName: "batch"}, id: "act-1"}
			r := g.request()
			assert.Equal(t, capacity.Class(2), r.Class, "the class it names")
			require.NotNil(t, r.Rule)
			assert.Equal(t, tc.want, *r.Rule)
		})
	}
}

package capacity

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// TestLapsedLeases: a lapsed lease id is remembered for LapsedLeaseMemory
// and then forgotten, in the order ids lapsed, whatever how many there are;
// taking an id forgets it; an id lapsed again is remembered from its last
// lapse.
func TestLapsedLeases(t *testing.T) {
	var e lapsedLeases
	t0 := time.Unix(1_700_000_000, 0)
	require.False(t, e.take("c#0", t0), "nothing lapsed")
	for i := range 1000 {
		e.add(fmt.Sprint("c#", i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	require.True(t, e.take("c#0", t0.Add(tuning.LapsedLeaseMemory-time.Nanosecond)))
	require.False(t, e.take("c#0", t0), "taken once")
	require.False(t, e.take("c#1", t0.Add(tuning.LapsedLeaseMemory+time.Millisecond)), "forgotten after tuning.LapsedLeaseMemory")
	require.False(t, e.take("c#x", t0), "never lapsed")
	e.drop("c#3")
	require.False(t, e.take("c#3", t0), "granted again")

	// c#2 lapses again later: the first lapse's turn does not forget it.
	e.add("c#2", t0.Add(30*time.Second))
	later := t0.Add(tuning.LapsedLeaseMemory + time.Second)
	e.add("late", later) // forgets what lapsed tuning.LapsedLeaseMemory before
	require.Len(t, e.forget, 2, "only c#2 and late are remembered")
	require.LessOrEqual(t, len(e.order)-e.head, 3, "the queue holds what is remembered and c#2's earlier lapse at most")
	require.True(t, e.take("c#2", later))

	// A clock that went back forgets nothing early.
	e.add("back", t0)
	require.True(t, e.take("late", later))
}

package capacity

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEndedLeases: an ended lease id is remembered for EndedLeaseMemory
// and then forgotten, in the order ids ended, whatever how many there are;
// an id ended again is remembered from its last end.
func TestEndedLeases(t *testing.T) {
	var e endedLeases
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 1000 {
		e.add(fmt.Sprint("c#", i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	require.True(t, e.has("c#0", t0.Add(EndedLeaseMemory-time.Nanosecond)))
	require.False(t, e.has("c#0", t0.Add(EndedLeaseMemory)), "forgotten after EndedLeaseMemory")
	require.False(t, e.has("c#x", t0), "never ended")

	// c#1 ends again later: the first end's turn does not forget it.
	e.add("c#1", t0.Add(30*time.Second))
	later := t0.Add(EndedLeaseMemory + time.Second)
	e.add("late", later) // forgets what ended a minute before
	require.True(t, e.has("c#1", later))
	require.False(t, e.has("c#2", later))
	require.Len(t, e.forget, 2, "only c#1 and late are remembered")
	require.LessOrEqual(t, len(e.order)-e.head, 3, "the queue holds what is remembered and c#1's earlier end at most")

	// A clock that went back forgets nothing early.
	e.add("back", t0)
	require.True(t, e.has("late", later))
}

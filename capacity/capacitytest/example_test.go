package capacitytest_test

import (
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
)

// A ManualClock moves only when the test moves it: a timer fires once the
// clock passes its time, never by waiting.
func ExampleManualClock() {
	clock := capacitytest.NewManualClock(time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC))
	timer := clock.NewTimer(time.Second)
	clock.Advance(500 * time.Millisecond)
	select {
	case <-timer.C():
		fmt.Println("fired early")
	default:
		fmt.Println("waiting:", clock.Waiters())
	}
	clock.Advance(500 * time.Millisecond)
	fmt.Println("fired at", (<-timer.C()).Format(time.TimeOnly))
	// Output:
	// waiting: 1
	// fired at 12:00:01
}

package figures_test

import (
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/samples/goodput/figures"
)

// The sample's p99 is the nearest rank: a value some call really waited.
func ExamplePercentile() {
	waits := []time.Duration{40 * time.Millisecond, 10 * time.Millisecond, 2 * time.Second, 20 * time.Millisecond}
	fmt.Println(figures.Percentile(waits, 0.5), figures.Percentile(waits, 0.99))
	// Output: 20ms 2s
}

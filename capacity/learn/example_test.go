package learn_test

import (
	"fmt"

	"github.com/tollgate-dev/tollgate/capacity/learn"
)

// A Histogram of the output calls of one kind produced gives the quantile
// the gate reserves instead of max_tokens; it errs high, by less than a
// bucket's width.
func ExampleHistogram() {
	var h learn.Histogram
	for _, out := range []float64{180, 220, 250, 260, 300, 310, 350, 400, 420, 900} {
		_ = h.Add(out)
	}
	p90, _ := h.Quantile(0.9)
	fmt.Printf("%.0f calls, p90 ≤ %.0f tokens\n", h.Count(), p90)
	// Output: 10 calls, p90 ≤ 431 tokens
}

// CalibrateInput scales an estimated prompt by the input ratio a scope
// learned, held to [MinInputRatio, MaxInputRatio].
func ExampleCalibrateInput() {
	fmt.Println(learn.CalibrateInput(1000, 0.8), learn.CalibrateInput(1000, 5))
	// Output: 800 2000
}

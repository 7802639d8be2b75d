package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/tollgate-dev/tollgate/samples/goodput/figures"
)

// Row is one run's line of the table and of the -json output.
type Row struct {
	Strategy         string  `json:"strategy"`
	Provider         string  `json:"provider"`
	Bucket           string  `json:"bucket"`
	Calls            int     `json:"calls"`
	Completed        int     `json:"completed"`
	ProviderRequests int     `json:"provider_requests"`
	Provider429s     int     `json:"provider_429s"`
	Utilization      float64 `json:"utilization"`
	DrainRatio       float64 `json:"drain_ratio"`
	// InteractiveP99 is 0 for a run without interactive calls (-every 0).
	InteractiveP99 float64 `json:"interactive_p99_s"`
}

// Row returns r's row.
func (r Result) Row() Row {
	ratio := r.Figures.DrainRatio
	if r.TimedOut {
		ratio = r.Figures.Drain.Seconds() / r.Spec.Target.Seconds()
	}
	return Row{
		Strategy: r.Spec.Strategy, Provider: r.Spec.Provider.Name, Bucket: r.Spec.Bucket.Name,
		Calls: r.Spec.Workload.Calls, Completed: r.Completed,
		ProviderRequests: r.Figures.Requests, Provider429s: r.Figures.RateLimited,
		Utilization:    round(r.Figures.Utilization, 3),
		DrainRatio:     round(ratio, 3),
		InteractiveP99: round(figures.Percentile(r.Interactive, 0.99).Seconds(), 3),
	}
}

// interactiveP99 is r's interactive p99 as the table, the chart and the
// progress lines show it: "–" for a run without interactive calls
// (-every 0).
func interactiveP99(r Result) string {
	if len(r.Interactive) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3fs", r.Row().InteractiveP99)
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// tableHeader explains the columns.
const tableHeader = `drain: first batch request's arrival to the last batch call's completion.
minimum: the provider's theoretical minimum for what it charged the run (batch and interactive,
  admitted requests): max over per-minute dimensions d of max(0, charged_d − bucket_d) / rate_d;
  the dimension of that maximum is the binding one.
drain ratio = drain / minimum; utilization = charged in the binding dimension / (bucket + rate × drain).
left, answer, filled split drain − minimum at the batch call answered last (= left + answer − filled):
  left is what the binding bucket still held when the provider admitted it, answer the time from its
  arrival to the end, filled what the provider admitted meanwhile; the last two in seconds of refill.
  Only left is the strategy's to spend; a run past its timeout shows "–".
requests and 429s are the fake provider's own count; p99 is the interactive calls' latency,
  from scheduling the activity to its completion. A run past its timeout shows "≥" on its drain
  (then the timeout) and its ratio (then over the planned minimum, -target; its minimum column
  is only what the provider had charged by the timeout).
`

// writeTable writes the table of results to w.
func writeTable(w io.Writer, results []Result) error {
	if _, err := io.WriteString(w, tableHeader); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tprovider\tbucket\tcompleted\trequests\t429s\tbinding\tminimum\tdrain\tratio\tleft\tanswer\tfilled\tutilization\tinteractive p99\t")
	for _, r := range results {
		row := r.Row()
		over := ""
		if r.TimedOut {
			over = "≥"
		}
		split := "–\t–\t–" // a run that did not drain has no last call
		if t := r.Figures.Tail; !r.TimedOut {
			split = fmt.Sprintf("%.3fs\t%.3fs\t%.3fs", t.Left.Seconds(), t.Answer.Seconds(), t.Filled.Seconds())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d\t%d\t%s\t%.1fs\t%s%.1fs\t%s%.3f\t%s\t%.3f\t%s\t\n",
			row.Strategy, row.Provider, row.Bucket, row.Completed, row.Calls, row.ProviderRequests, row.Provider429s,
			r.Figures.Binding.Dimension, r.Figures.Binding.Minimum.Seconds(), over, r.Figures.Drain.Seconds(),
			over, row.DrainRatio, split, row.Utilization, interactiveP99(r))
	}
	return tw.Flush()
}

// writeJSON writes one JSON object per result to w.
func writeJSON(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	for _, r := range results {
		if err := enc.Encode(r.Row()); err != nil {
			return err
		}
	}
	return nil
}

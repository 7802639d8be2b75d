package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/tollgate-dev/tollgate/testsuite"
)

// Acceptance targets (issue 11).
const (
	minJain              = 0.98
	maxGapCalls          = 2 // max_service_gap_tokens ≤ maxGapCalls × largest_call_tokens
	maxNewcomerWait      = Refill
	maxInteractiveP99    = 500 * time.Millisecond
	minBulkShareLeftover = 0.9
)

// Summary is a run's -json object.
type Summary struct {
	Store                string                `json:"store"`
	Workers              int                   `json:"workers"`
	Seed                 uint64                `json:"seed"`
	JainIndex            float64               `json:"jain_index"`
	JainABC              float64               `json:"jain_index_abc"`
	JainABCD             float64               `json:"jain_index_abcd"`
	MaxServiceGap        float64               `json:"max_service_gap_tokens"`
	GapPair              string                `json:"max_service_gap_pair"`
	GapAt                float64               `json:"max_service_gap_at_s"`
	LargestCall          int64                 `json:"largest_call_tokens"`
	GapABCD              float64               `json:"max_service_gap_abcd_tokens"`
	GapABCDPair          string                `json:"max_service_gap_abcd_pair"`
	NewcomerWait         float64               `json:"newcomer_wait_s"`
	InteractiveP99       float64               `json:"interactive_p99_s"`
	InteractiveP99Done   float64               `json:"interactive_p99_completion_s"`
	InteractiveCalls     int                   `json:"interactive_calls"`
	InteractiveFailed    int                   `json:"interactive_failed"`
	BulkShareOfLeftover  float64               `json:"bulk_share_of_leftover"`
	Provider429s         int                   `json:"provider_429s"`
	ProviderRequests     int                   `json:"provider_requests"`
	RefillPeriod         float64               `json:"refill_period_s"`
	TokensPerMinute      int64                 `json:"tokens_per_minute"`
	Duration             float64               `json:"duration_s"`
	NewcomerAt           float64               `json:"newcomer_at_s"`
	CapacityTokens       int64                 `json:"capacity_tokens"`
	BulkTokens           int64                 `json:"bulk_tokens"`
	InteractiveTokens    int64                 `json:"interactive_tokens"`
	Tenants              map[string]TenantLine `json:"tenants"`
	TimedOut             bool                  `json:"timed_out,omitempty"`
	Note                 string                `json:"note,omitempty"`
	InteractiveEverySecs float64               `json:"interactive_every_s"`
}

// TenantLine is one bulk tenant's part of the summary.
type TenantLine struct {
	Weight  float64 `json:"weight"`
	Calls   int     `json:"calls"`
	Backlog int64   `json:"backlog_tokens"`
	// TokensABC and TokensABCD are the tokens it was served in the two
	// phases (absent where it was not backlogged all along).
	TokensABC  *int64 `json:"tokens_abc,omitempty"`
	TokensABCD *int64 `json:"tokens_abcd,omitempty"`
	Completed  int    `json:"completed"`
	Drained    bool   `json:"drained"`
}

// Summary returns r's summary.
func (r Result) Summary() Summary {
	f := r.Figures
	s := Summary{
		Store: r.Store, Workers: r.Workers, Seed: r.Plan.Workload.Seed,
		JainIndex: round(f.Jain, 4), JainABC: round(f.JainBefore, 4), JainABCD: round(f.JainAfter, 4),
		MaxServiceGap: math.Round(f.MaxGap), GapPair: f.GapPair, GapAt: round(since(f.Start, f.GapAt), 2),
		LargestCall: f.LargestCall, GapABCD: math.Round(f.Newcomer.MaxGap), GapABCDPair: f.Newcomer.GapPair,
		NewcomerWait:   round(f.NewcomerWait.Seconds(), 3),
		InteractiveP99: round(f.InteractiveP99.Seconds(), 3), InteractiveP99Done: round(f.InteractiveP99Done.Seconds(), 3),
		InteractiveCalls: f.InteractiveCalls, InteractiveFailed: f.InteractiveFailed,
		BulkShareOfLeftover: round(f.BulkShareOfLeftover, 4),
		Provider429s:        f.Provider429s, ProviderRequests: f.ProviderRequests,
		RefillPeriod: Refill.Seconds(), TokensPerMinute: r.Plan.Limits.TokensPerMinute,
		Duration: round(since(f.Start, r.Record.End), 2), NewcomerAt: round(since(f.Start, f.NewcomerAt), 2),
		CapacityTokens: int64(f.Capacity), BulkTokens: f.BulkTokens, InteractiveTokens: f.InteractiveTokens,
		Tenants: map[string]TenantLine{}, TimedOut: r.TimedOut, Note: r.Note, InteractiveEverySecs: r.Plan.Every.Seconds(),
	}
	for _, t := range r.Plan.Tenants {
		p := r.Progress[t.Name]
		line := TenantLine{Weight: t.Weight, Calls: t.Calls, Backlog: t.Tokens, Completed: p.Completed, Drained: !p.Last.IsZero()}
		if v, ok := f.Before[t.Name]; ok {
			line.TokensABC = &v
		}
		if v, ok := f.After[t.Name]; ok {
			line.TokensABCD = &v
		}
		s.Tenants[t.Name] = line
	}
	return s
}

// Check is one figure against its target.
type Check struct {
	Name, Value, Target string
	OK                  bool
}

// Checks returns s's figures against the acceptance targets.
func (s Summary) Checks() []Check {
	return []Check{
		{"jain_index", fmt.Sprintf("%.4f", s.JainIndex), fmt.Sprintf("≥ %v", minJain), s.JainIndex >= minJain},
		{"max_service_gap_tokens", fmt.Sprintf("%.0f (%s)", s.MaxServiceGap, s.GapPair),
			fmt.Sprintf("≤ %d × %d", maxGapCalls, s.LargestCall), s.MaxServiceGap <= float64(maxGapCalls*s.LargestCall)},
		{"newcomer_wait_s", fmt.Sprintf("%.3f", s.NewcomerWait), fmt.Sprintf("≤ %v", maxNewcomerWait.Seconds()), s.NewcomerWait <= maxNewcomerWait.Seconds()},
		{"interactive_p99_s", fmt.Sprintf("%.3f", s.InteractiveP99), fmt.Sprintf("≤ %v", maxInteractiveP99.Seconds()), s.InteractiveP99 <= maxInteractiveP99.Seconds()},
		{"bulk_share_of_leftover", fmt.Sprintf("%.4f", s.BulkShareOfLeftover), fmt.Sprintf("≥ %v", minBulkShareLeftover), s.BulkShareOfLeftover >= minBulkShareLeftover},
		{"provider_429s", fmt.Sprint(s.Provider429s), "0", s.Provider429s == 0},
	}
}

// writeTable writes r readably to w.
func writeTable(w io.Writer, r Result) error {
	s := r.Summary()
	fmt.Fprintf(w, "store %s (%d worker process(es)), seed %d; TPM %d in %v buckets; window %.1f s from the first request, D at +%.1f s\n",
		s.Store, s.Workers, s.Seed, s.TokensPerMinute, Refill, s.Duration, s.NewcomerAt)
	if r.TimedOut {
		fmt.Fprintln(w, "no bulk tenant drained before the timeout: the window ends there")
	}
	if r.Note != "" {
		fmt.Fprintln(w, r.Note)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tenant\tweight\tcalls\tbacklog\tA,B,C phase\tper weight\tA,B,C,D phase\tper weight\tcompleted\t")
	for _, t := range r.Plan.Tenants {
		l := s.Tenants[t.Name]
		fmt.Fprintf(tw, "%s\t%g\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t\n", t.Name, l.Weight, l.Calls, l.Backlog,
			tokens(l.TokensABC, 1), tokens(l.TokensABC, l.Weight), tokens(l.TokensABCD, 1), tokens(l.TokensABCD, l.Weight), l.Completed)
	}
	fmt.Fprintf(tw, "interactive\t\t%d\t\t\t\t\t\t%d\t\n", s.InteractiveCalls, s.InteractiveCalls-s.InteractiveFailed)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "served in the window: bulk %d, interactive %d tokens of a capacity of %d; %d requests, %d × 429\n",
		s.BulkTokens, s.InteractiveTokens, s.CapacityTokens, s.ProviderRequests, s.Provider429s)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tvalue\ttarget\t")
	for _, c := range s.Checks() {
		mark := "ok"
		if !c.OK {
			mark = "MISSED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.Value, c.Target, mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "context: Jain's index of A, B, C %.4f, of A, B, C, D %.4f; the largest gap counted from D's arrival %.0f (%s)\n",
		s.JainABC, s.JainABCD, s.GapABCD, s.GapABCDPair)
	return err
}

// writeJSON writes r's summary to w as one JSON object.
func writeJSON(w io.Writer, r Result) error {
	return json.NewEncoder(w).Encode(r.Summary())
}

func tokens(v *int64, weight float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(*v)/weight)
}

func since(from, t time.Time) float64 {
	if from.IsZero() || t.IsZero() {
		return 0
	}
	return t.Sub(from).Seconds()
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// writeCSV writes the fake provider's record of r to w, one request a line:
// its arrival and completion (seconds from the first request), tag,
// status, tokens charged and the token bucket's level after admission.
func writeCSV(w io.Writer, r Result) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"seq", "arrival_s", "done_s", "tag", "status", "tokens", "remaining_tokens"})
	for _, e := range r.Record.Entries {
		_ = cw.Write([]string{
			strconv.FormatUint(e.Seq, 10),
			strconv.FormatFloat(since(r.Figures.Start, e.Arrival), 'f', 4, 64),
			strconv.FormatFloat(since(r.Figures.Start, e.Done), 'f', 4, 64),
			e.Tag, strconv.Itoa(e.Status),
			strconv.FormatInt(e.Cost(testsuite.Tokens), 10),
			strconv.FormatInt(e.Remaining[testsuite.Tokens], 10),
		})
	}
	cw.Flush()
	return cw.Error()
}

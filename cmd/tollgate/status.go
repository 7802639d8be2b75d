package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

var errUsage = errors.New("usage")

// scopeStatus is one scope's line of `tollgate status`.
type scopeStatus struct {
	Scope      string             `json:"scope"`
	Levels     map[string]float64 `json:"levels"`     // level per limited dimension
	Capacities map[string]float64 `json:"capacities"` // bucket size or daily allowance
	InFlight   int                `json:"in_flight"`
	MaxFlight  float64            `json:"max_in_flight,omitempty"`
	Tickets    int                `json:"tickets"`
	QueueAge   time.Duration      `json:"queue_ns"` // until the last booked ticket is due
	Blocks     []string           `json:"blocks,omitempty"`
}

func status(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var rf redisFlags
	rf.register(fs)
	asJSON := fs.Bool("json", false, "print JSON lines instead of a table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	store, release, err := rf.open(ctx)
	if err != nil {
		return err
	}
	defer release()
	scopes, err := store.Scopes(ctx)
	if err != nil {
		return err
	}
	var lines []scopeStatus
	for _, sc := range scopes {
		snap, err := store.Snapshot(ctx, sc)
		if err != nil {
			return fmt.Errorf("snapshot of %s: %w", sc.Key(), err)
		}
		lines = append(lines, statusOf(snap))
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, l := range lines {
			if err := enc.Encode(l); err != nil {
				return err
			}
		}
		return nil
	}
	return printStatus(stdout, lines)
}

func statusOf(snap capacity.Snapshot) scopeStatus {
	st := scopeStatus{Scope: snap.Scope.Key(), Levels: map[string]float64{}, Capacities: map[string]float64{},
		InFlight: len(snap.Leases), Tickets: len(snap.Tickets)}
	for d := capacity.Dimension(0); int(d) < capacity.NumDimensions; d++ {
		b := snap.Budget[d]
		if !b.Limited {
			continue
		}
		if d == capacity.InFlight {
			st.MaxFlight = b.Capacity
			continue
		}
		st.Levels[d.String()] = snap.Level[d]
		st.Capacities[d.String()] = b.Capacity
	}
	for _, tk := range snap.Tickets {
		if age := tk.At.Sub(snap.Now); age > st.QueueAge {
			st.QueueAge = age
		}
	}
	for _, b := range snap.Blocks {
		st.Blocks = append(st.Blocks, blockString(b, snap.Now))
	}
	return st
}

func printStatus(w io.Writer, lines []scopeStatus) error {
	if len(lines) == 0 {
		_, err := fmt.Fprintln(w, "no scopes in Redis under this prefix (nothing used recently)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tBUDGETS (level/capacity)\tIN FLIGHT\tTICKETS\tQUEUE\tBLOCKS")
	for _, l := range lines {
		var budgets []string
		for _, d := range capacity.Dimensions() {
			if c, ok := l.Capacities[d.String()]; ok {
				budgets = append(budgets, fmt.Sprintf("%s %.0f/%.0f", d, l.Levels[d.String()], c))
			}
		}
		flight := fmt.Sprint(l.InFlight)
		if l.MaxFlight > 0 {
			flight = fmt.Sprintf("%d/%.0f", l.InFlight, l.MaxFlight)
		}
		blocks := strings.Join(l.Blocks, ", ")
		if blocks == "" {
			blocks = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%v\t%s\n", l.Scope, strings.Join(budgets, " "), flight, l.Tickets, l.QueueAge.Round(time.Millisecond), blocks)
	}
	return tw.Flush()
}

// blockString describes b as of now: "cooldown for 42s".
func blockString(b capacity.Block, now time.Time) string {
	return fmt.Sprintf("%s for %v", b.Reason, b.Until.Sub(now).Round(time.Second))
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

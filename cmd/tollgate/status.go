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
	// Flows are the scope's fair-queuing flows (class, fairness key), by
	// class then key; Keys the fairness keys with caps, by key.
	Flows []flowStatus `json:"flows,omitempty"`
	Keys  []keyStatus  `json:"keys,omitempty"`
}

// flowStatus is one (class, fairness key) flow of a scope.
type flowStatus struct {
	// Class is the class's name (-classes), ClassIndex its index.
	Class      string `json:"class"`
	ClassIndex int    `json:"class_index"`
	// Key is the fairness key; "" is the class's shared key.
	Key string `json:"key"`
	// Rank is the rank the flow was last served at (a class lifted by
	// aging ranks higher).
	Rank int `json:"rank"`
	// Waiting is the flow's booked tickets; Queue the time until the last
	// of them is due.
	Waiting int           `json:"waiting"`
	Queue   time.Duration `json:"queue_ns"`
	// Granted is the tokens granted to the flow, settled to what its calls
	// cost, since the store first saw it.
	Granted float64 `json:"granted_tokens"`
	// Ahead is how far the flow's virtual finish is ahead of its rank's
	// virtual time, in tokens per unit of weight: how much more than its
	// share it was served lately. 0: not ahead (an idle flow keeps no
	// credit).
	Ahead float64 `json:"ahead"`
}

// keyStatus is the counters of a fairness key with caps on a scope.
type keyStatus struct {
	Key string `json:"key"`
	// DayUsed is the tokens charged to the key in the day window ending
	// DayEnd.
	DayUsed float64   `json:"day_used"`
	DayEnd  time.Time `json:"day_end"`
	// Share is what the key's own per-minute buckets (a Share cap) hold,
	// per limited per-minute dimension; 0 for a key without a share cap.
	Share map[string]float64 `json:"share_levels,omitempty"`
}

func status(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var rf redisFlags
	rf.register(fs)
	asJSON := fs.Bool("json", false, "print JSON lines instead of a table")
	pools := poolFlag{}
	fs.Var(pools, "pool", "a key pool of the workers' interceptor.Options.Pools, name=member,member,... (repeatable): shows each member's state per quota")
	classList := fs.String("classes", "", "the workers' class names in index order, comma-separated, as in interceptor.Options.Classes (default: the built-in "+
		strings.Join(builtinClassNames(), ",")+")")
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
	names := builtinClassNames()
	if *classList != "" {
		names = strings.Split(*classList, ",")
	}
	var lines []scopeStatus
	for _, sc := range scopes {
		snap, err := store.Snapshot(ctx, sc)
		if err != nil {
			return fmt.Errorf("snapshot of %s: %w", sc.Key(), err)
		}
		lines = append(lines, statusOf(snap, names))
	}
	var poolLines []poolStatus
	if len(pools) > 0 {
		if poolLines, err = poolsOf(ctx, store, scopes, pools); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, l := range lines {
			if err := enc.Encode(l); err != nil {
				return err
			}
		}
		for _, p := range poolLines { // after the scopes: lines with "pool"
			if err := enc.Encode(p); err != nil {
				return err
			}
		}
		return nil
	}
	if err := printStatus(stdout, lines); err != nil || len(pools) == 0 {
		return err
	}
	return printPools(stdout, poolLines)
}

// builtinClassNames is the names of the built-in classes in index order.
func builtinClassNames() []string {
	var names []string
	for _, c := range capacity.Classes() {
		names = append(names, c.String())
	}
	return names
}

// statusOf is the status of the scope of snap; classNames names the
// classes by index.
func statusOf(snap capacity.Snapshot, classNames []string) scopeStatus {
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
	st.Flows = flowsOf(snap, classNames)
	for _, k := range snap.Keys {
		ks := keyStatus{Key: k.Key, DayUsed: k.DayUsed, DayEnd: k.DayEnd}
		for _, d := range capacity.Dimensions() {
			if d.PerMinute() && snap.Budget[d].Limited {
				if ks.Share == nil {
					ks.Share = map[string]float64{}
				}
				ks.Share[d.String()] = k.ShareLevel[d]
			}
		}
		st.Keys = append(st.Keys, ks)
	}
	return st
}

// flowsOf is the flows of snap, with their waiting tickets.
func flowsOf(snap capacity.Snapshot, classNames []string) []flowStatus {
	type id struct {
		class capacity.Class
		key   string
	}
	at := map[id]int{}
	var flows []flowStatus
	for _, f := range snap.Flows {
		at[id{f.Class, f.Key}] = len(flows)
		flows = append(flows, flowStatus{
			Class: className(f.Class, classNames), ClassIndex: int(f.Class), Key: f.Key, Rank: f.Rank,
			Granted: f.Granted, Ahead: max(f.Finish-f.Virtual, 0),
		})
	}
	for _, tk := range snap.Tickets {
		i, ok := at[id{tk.Class, tk.Key}]
		if !ok {
			continue // a flow the store forgot: its tickets count in the scope's
		}
		flows[i].Waiting++
		flows[i].Queue = max(flows[i].Queue, tk.At.Sub(snap.Now))
	}
	return flows
}

// className is the name of class c: classNames[c], or "class(N)".
func className(c capacity.Class, classNames []string) string {
	if c >= 0 && int(c) < len(classNames) && classNames[c] != "" {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", int(c))
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
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printFlows(w, lines); err != nil {
		return err
	}
	return printKeys(w, lines)
}

// printFlows prints the fair-queuing flows of every scope, if any.
func printFlows(w io.Writer, lines []scopeStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := false
	for _, l := range lines {
		for _, f := range l.Flows {
			if !header {
				fmt.Fprintln(tw, "\nSCOPE\tCLASS\tKEY\tRANK\tWAITING\tQUEUE\tGRANTED TOKENS\tAHEAD")
				header = true
			}
			key := f.Key
			if key == "" {
				key = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%v\t%.0f\t%.0f\n", l.Scope, f.Class, key, f.Rank, f.Waiting, f.Queue.Round(time.Millisecond), f.Granted, f.Ahead)
		}
	}
	return tw.Flush()
}

// printKeys prints the fairness keys with caps of every scope, if any.
func printKeys(w io.Writer, lines []scopeStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := false
	for _, l := range lines {
		for _, k := range l.Keys {
			if !header {
				fmt.Fprintln(tw, "\nSCOPE\tKEY\tDAY USED\tDAY ENDS\tSHARE LEVELS")
				header = true
			}
			var share []string
			for _, d := range capacity.Dimensions() {
				if v, ok := k.Share[d.String()]; ok {
					share = append(share, fmt.Sprintf("%s %.0f", d, v))
				}
			}
			shares := strings.Join(share, " ")
			if shares == "" {
				shares = "-"
			}
			dayEnd := "-"
			if !k.DayEnd.IsZero() {
				dayEnd = k.DayEnd.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\n", l.Scope, k.Key, k.DayUsed, dayEnd, shares)
		}
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

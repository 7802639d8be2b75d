package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// scopeStatus is one scope's line of `tollgate status`.
type scopeStatus struct {
	Scope string `json:"scope"`
	// Engine is the store's engine that holds the scope: "scripts" or
	// "records" (redisstore.Store.EngineOf); "" when not known.
	Engine     string             `json:"engine,omitempty"`
	Levels     map[string]float64 `json:"levels"`     // level per limited dimension
	Capacities map[string]float64 `json:"capacities"` // bucket size or daily allowance
	// Reported are the dimensions whose limit is the one the provider
	// reported: none is configured (interceptor.Options.Limits).
	Reported  []string      `json:"reported,omitempty"`
	InFlight  int           `json:"in_flight"`
	MaxFlight float64       `json:"max_in_flight,omitempty"`
	Tickets   int           `json:"tickets"`
	QueueAge  time.Duration `json:"queue_ns"` // until the last booked ticket is due
	Blocks    []string      `json:"blocks,omitempty"`
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

// statusReport is one reading of `tollgate status`, its -json line (one
// per refresh with -watch).
type statusReport struct {
	// At is when the reading was taken (the local clock).
	At     time.Time `json:"at"`
	Source source    `json:"source"`
	// Scopes are the scopes with state under the prefix, by key.
	Scopes []scopeStatus `json:"scopes"`
	// Pools are the members of each key pool given with -pool, per quota.
	Pools []poolStatus `json:"pools,omitempty"`
	// Empty, if set, says why Scopes is empty: nothing under the prefix.
	Empty string `json:"empty,omitempty"`
	// Error, if set, is why this refresh of -watch failed; the next one
	// tries again.
	Error string `json:"error,omitempty"`
}

const statusUsage = `usage: tollgate status [flags]

Shows every scope with state in the Redis store under -prefix, read-only:
the engine that holds it (scripts or records: redisstore.Options.Engine),
each budget's level against its capacity (a negative level is debt or
booked tickets), calls in flight, booked tickets and how far ahead the last
one is due (QUEUE), blocks in force (a cooldown after a 429, an exhausted
quota, a rejected credential, an open breaker), then the fair-queuing flows
(class, fairness key, rank, waiting calls, tokens granted, lead over their
share) and the fairness keys with caps (tokens used today, share buckets).

A scope's state expires some time after its last call, so an idle scope
disappears; an empty listing exits 3 and says where it looked.

examples:
  tollgate status -redis 10.0.0.5:6379
  tollgate status -redis node1:6379,node2:6379,node3:6379 -json      # a Cluster
  tollgate status -redis sentinel1:26379,sentinel2:26379 -sentinel-master tollgate
  tollgate status -watch 5s                                          # refresh every 5 s until Ctrl-C
  tollgate status -watch 10 -count 6 -json > status.jsonl            # a minute of readings, one JSON line each

flags:
`

func status(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", statusUsage, stderr, true)
	var rf redisFlags
	rf.register(fs)
	asJSON := fs.Bool("json", false, "print one JSON object per reading (statusReport: at, source, scopes, empty, error) instead of tables")
	pools := poolFlag{}
	fs.Var(pools, "pool", "a key pool of the workers' interceptor.Options.Pools, name=member,member,... (repeatable): shows each member's state per quota")
	classList := fs.String("classes", "", "the workers' class `names` in index order, comma-separated, as in interceptor.Options.Classes (default: the built-in "+
		strings.Join(builtinClassNames(), ",")+")")
	var every interval
	fs.Var(&every, "watch", "refresh every `period` (5s, or seconds: 5) until interrupted; 0: once")
	count := fs.Int("count", 0, "with -watch, stop after this many readings (0: until interrupted)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tollgate status: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	if *count < 0 {
		return fmt.Errorf("%w: -count is %d; want >= 0", errUsage, *count)
	}
	names := builtinClassNames()
	if *classList != "" {
		names = strings.Split(*classList, ",")
	}
	dctx, cancel := context.WithTimeout(ctx, rf.timeout)
	store, release, err := rf.open(dctx)
	cancel()
	if err != nil {
		return err
	}
	defer release()

	read := func() (statusReport, error) {
		rep := statusReport{At: time.Now(), Source: rf.source(), Scopes: []scopeStatus{}}
		ctx, cancel := context.WithTimeout(ctx, rf.timeout)
		defer cancel()
		scopes, err := store.Scopes(ctx)
		if err != nil {
			return rep, err
		}
		for _, sc := range scopes {
			snap, err := store.Snapshot(ctx, sc)
			if err != nil {
				return rep, fmt.Errorf("snapshot of %s: %w", sc.Key(), err)
			}
			st := statusOf(snap, names)
			engine, ok, err := store.EngineOf(ctx, sc)
			if err != nil {
				return rep, fmt.Errorf("engine of %s: %w", sc.Key(), err)
			}
			if ok {
				st.Engine = engine.String()
			}
			rep.Scopes = append(rep.Scopes, st)
		}
		if len(pools) > 0 {
			if rep.Pools, err = poolsOf(ctx, store, scopes, pools); err != nil {
				return rep, err
			}
		}
		if len(rep.Scopes) == 0 {
			e := rf.empty(ctx, "no scopes", "no worker has used a scope recently (state expires after a scope goes idle)")
			rep.Empty = e.reason
			return rep, e
		}
		return rep, nil
	}
	show := func(rep statusReport, err error) error {
		if *asJSON {
			if err != nil && rep.Empty == "" {
				rep.Error = err.Error()
			}
			return writeJSON(stdout, rep)
		}
		if every > 0 {
			if isTerminal(stdout) {
				fmt.Fprint(stdout, "\x1b[H\x1b[2J") // clear the screen
			}
			fmt.Fprintf(stdout, "%s under prefix %q at %s (every %v; Ctrl-C stops)\n", rf.where(), rf.prefix,
				rep.At.Format("15:04:05"), time.Duration(every))
		}
		switch {
		case rep.Empty != "":
			_, err := fmt.Fprintln(stdout, rep.Empty)
			return err
		case err != nil:
			_, err := fmt.Fprintln(stdout, "refresh failed:", err)
			return err
		}
		if err := printStatus(stdout, rep.Scopes); err != nil || len(rep.Pools) == 0 {
			return err
		}
		return printPools(stdout, rep.Pools)
	}

	if every == 0 {
		rep, err := read()
		var empty *emptyError
		if err != nil && !errors.As(err, &empty) {
			return err
		}
		if *asJSON || empty == nil {
			if werr := show(rep, err); werr != nil {
				return werr
			}
		}
		return err // the empty reason: on stderr, exit 3
	}
	tick := time.NewTicker(time.Duration(every))
	defer tick.Stop()
	for n := 1; ; n++ {
		rep, err := read()
		if ctx.Err() != nil {
			return nil // interrupted during the reading: the end of a watch
		}
		if werr := show(rep, err); werr != nil {
			return werr
		}
		if *count > 0 && n >= *count {
			return err // the last reading's status
		}
		select {
		case <-ctx.Done():
			return nil // interrupted: the end of a watch
		case <-tick.C:
		}
	}
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
		if snap.Limits.Limit(d) == 0 {
			st.Reported = append(st.Reported, d.String())
		}
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
		_, err := fmt.Fprintln(w, "no scopes")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tENGINE\tBUDGETS (level/capacity)\tIN FLIGHT\tTICKETS\tQUEUE\tBLOCKS")
	for _, l := range lines {
		var budgets []string
		for _, d := range capacity.Dimensions() {
			if c, ok := l.Capacities[d.String()]; ok {
				budget := fmt.Sprintf("%s %.0f/%.0f", d, l.Levels[d.String()], c)
				if slices.Contains(l.Reported, d.String()) {
					budget += " (reported)"
				}
				budgets = append(budgets, budget)
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
		engine := l.Engine
		if engine == "" {
			engine = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%v\t%s\n", l.Scope, engine, strings.Join(budgets, " "), flight, l.Tickets, l.QueueAge.Round(time.Millisecond), blocks)
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

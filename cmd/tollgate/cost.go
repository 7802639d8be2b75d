package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate-dev/tollgate/capacity/ledger"
)

// costLine is one ledger row of `tollgate cost`, its -json line: what the
// calls of one day, scope, tenant and workflow type used and cost.
type costLine struct {
	Day          string `json:"day"`
	Scope        string `json:"scope"`
	Provider     string `json:"provider"`
	Tenant       string `json:"tenant"`        // "" for calls without a fairness key
	WorkflowType string `json:"workflow_type"` // "" if unknown
	Calls        int64  `json:"calls"`
	Unpriced     int64  `json:"unpriced_calls"` // calls whose model had no price: cost 0
	ledger.Tokens
	Cost float64 `json:"cost"`
}

const costUsage = `usage: tollgate cost [flags]

Shows the cost ledger the workers keep in the Redis store
(interceptor.Options.Ledger): per day, scope, tenant (fairness key) and
workflow type, the calls that settled with usage, their tokens as the
provider reported them (input not read from the cache, cached input,
output with reasoning) and their cost at the workers' price table
(interceptor.Options.Prices, per million tokens, in its currency unit).
A call whose model had no price is counted in UNPRICED, with its tokens
and no cost. A day is the scope's day window (Limits.DayReset, UTC
midnight by default), named by the date it starts on; days are kept 35
days after their last call. In the table, "-" is a call without a tenant
or a workflow type; -tenant - selects the calls without a tenant.

flags:
`

// errEmptyLedger is returned when the store holds no ledger rows.
var errEmptyLedger = errors.New("nothing in the cost ledger")

func cost(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cost", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), costUsage)
		fs.PrintDefaults()
	}
	var rf redisFlags
	rf.register(fs)
	asJSON := fs.Bool("json", false, "print JSON lines, one per day, scope, tenant and workflow type, instead of a table")
	day := fs.String("day", "", "only this day, `YYYY-MM-DD`")
	tenant := fs.String("tenant", "", "only this tenant (fairness key); - for the calls without one")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tollgate cost: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	if *day != "" && ledger.ValidateDay(*day) != nil {
		fmt.Fprintf(stderr, "tollgate cost: -day %q is not a date laid out as YYYY-MM-DD\n", *day)
		return errUsage
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	store, release, err := rf.open(ctx)
	if err != nil {
		return err
	}
	defer release()
	rows, err := store.LedgerRows(ctx, *day)
	if err != nil {
		return err
	}
	want := *tenant
	if want == "-" {
		want = ""
	}
	lines := make([]costLine, 0, len(rows))
	for _, r := range rows {
		if *tenant != "" && r.Tenant != want {
			continue
		}
		lines = append(lines, costLine{Day: r.Day, Scope: r.Scope.Key(), Provider: string(r.Scope.Provider), Tenant: r.Tenant,
			WorkflowType: r.WorkflowType, Calls: r.Calls, Unpriced: r.Unpriced, Tokens: r.Tokens, Cost: r.Cost})
	}
	if len(lines) == 0 {
		return emptyLedger(rf, *day, *tenant, len(rows) > 0)
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
	return printCost(stdout, lines)
}

// emptyLedger explains why nothing was shown.
func emptyLedger(rf redisFlags, day, tenant string, filtered bool) error {
	var what []string
	if day != "" {
		what = append(what, "day "+day)
	}
	if tenant != "" {
		what = append(what, "tenant "+tenant)
	}
	if filtered {
		return fmt.Errorf("%w for %s in Redis at %q under prefix %q (other rows are)", errEmptyLedger, strings.Join(what, " and "), rf.addr, rf.prefix)
	}
	where := ""
	if day != "" {
		where = " for day " + day
	}
	return fmt.Errorf("%w%s in Redis at %q under prefix %q: workers record calls that settle with usage when "+
		"interceptor.Options.Ledger is set, and a day is kept 35 days after its last call; check -prefix",
		errEmptyLedger, where, rf.addr, rf.prefix)
}

func printCost(w io.Writer, lines []costLine) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	fmt.Fprintln(tw, "DAY\tSCOPE\tTENANT\tWORKFLOW\tCALLS\tUNPRICED\tINPUT\tCACHED\tOUTPUT\tCOST")
	var total costLine
	for _, l := range lines {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.6f\n", l.Day, l.Scope, dash(l.Tenant), dash(l.WorkflowType),
			l.Calls, l.Unpriced, l.Input, l.CachedInput, l.Output, l.Cost)
		total.Calls += l.Calls
		total.Unpriced += l.Unpriced
		total.Tokens = total.Tokens.Add(l.Tokens)
		total.Cost += l.Cost
	}
	fmt.Fprintf(tw, "total\t\t\t\t%d\t%d\t%d\t%d\t%d\t%.6f\n", total.Calls, total.Unpriced, total.Input, total.CachedInput, total.Output, total.Cost)
	return tw.Flush()
}

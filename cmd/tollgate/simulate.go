package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/accounting"
)

const simulateUsage = `usage: tollgate simulate [flags]

Plays a workload through tollgate's real admission rules (a memory store on
a simulated clock: tickets, classes, fair queuing, caps) against a
simulated provider that meters the limits themselves, and reports how long
calls waited, which limit bound, how much of the budget was used, how many
429s the provider would have sent and the least it had left. Nothing is
sent anywhere; the result is the same on every run.

The workload is -workload FILE: a JSON array of calls, or JSON lines (one
call per line), such as an hour of recorded traffic:

  {"at": 0.25, "input_tokens": 1200, "max_tokens": 512, "output_tokens": 310, "class": "interactive", "fairness_key": "acme"}

at is the arrival, in seconds from the start (or a duration, "1m30s", or an
RFC 3339 time: the earliest is the start); output_tokens what the call
actually produces; class and fairness_key are optional, as are latency (the
provider's time to answer, seconds or "2s"; default -latency) and deadline
(how long after its arrival the call may still be dispatched). Without
-workload: -calls identical calls of -input, -max-tokens and -output tokens,
-arrivals per second.

Limits, classes and fairness come from -config FILE (JSON; the flags given
override it) and the flags:

  {"provider": "openai",
   "limits": {"rpm": 500, "tpm": 150000, "burst": "5s", "margin": 0.95, "bulk_floor": 0.3, "aging": "2m"},
   "classes": [{"name": "interactive", "rank": 2}, {"name": "standard", "rank": 1},
               {"name": "bulk", "rank": 0, "floor": 0.3, "aging": "2m"}],
   "fairness": {"acme": {"weight": 3, "share": 0.5, "tokens_per_day": 2000000}},
   "latency": "2s", "provider_window": "1m", "headers": false}

-plot FILE writes the provider's remaining tokens and requests (and the
calls waiting and in flight) over time as a self-contained SVG, or, for a
FILE ending in .html, an HTML page with the chart and the summary.

examples:
  tollgate simulate -tpm 150000 -rpm 500 -calls 500
  tollgate simulate -workload traffic.jsonl -config limits.json -plot remaining.html
  tollgate simulate -workload traffic.jsonl -provider anthropic -rpm 50 -itpm 30000 -otpm 8000 \
      -class 'premium:rank=3,weight=2' -key 'acme:weight=3,share=0.5' -json

Exit status: 0 ok, 1 failure (a bad file, limits no call fits), 2 usage.

flags:
`

// simFlags are the flags of simulate.
type simFlags struct {
	c                      simConfig
	provider               string
	workload, config, plot string
	asJSON                 bool
	classes                classFlag
	keys                   keyFlag
}

// register defines simulate's flags on fs, their defaults those of f.
func (f *simFlags) register(fs *flag.FlagSet) {
	l := &f.c.Limits
	fs.StringVar(&f.workload, "workload", f.workload, "read the calls from `file` (JSON array or JSON lines; -: standard input)")
	fs.StringVar(&f.config, "config", f.config, "read provider, limits, classes, fairness, latency from `file` (JSON); flags given override it")
	fs.StringVar(&f.provider, "provider", f.provider, "accounting profile: openai, anthropic or gemini")
	fs.Int64Var(&l.RequestsPerMinute, "rpm", l.RequestsPerMinute, "requests per minute (0: unlimited)")
	fs.Int64Var(&l.TokensPerMinute, "tpm", l.TokensPerMinute, "combined tokens per minute")
	fs.Int64Var(&l.InputTokensPerMinute, "itpm", l.InputTokensPerMinute, "input tokens per minute")
	fs.Int64Var(&l.OutputTokensPerMinute, "otpm", l.OutputTokensPerMinute, "output tokens per minute")
	fs.Int64Var(&l.RequestsPerDay, "rpd", l.RequestsPerDay, "requests per day")
	fs.Int64Var(&l.TokensPerDay, "tpd", l.TokensPerDay, "tokens per day")
	fs.Int64Var(&l.MaxInFlight, "inflight", l.MaxInFlight, "calls in flight")
	fs.DurationVar(&l.Burst, "burst", l.Burst, "bucket size as time at the full rate (Limits.Burst)")
	fs.Int64Var(&l.TokenBurst, "token-burst", l.TokenBurst, "minimum token bucket size (Limits.TokenBurst)")
	fs.Float64Var(&l.SafetyMargin, "margin", l.SafetyMargin, "fraction of each limit used (Limits.SafetyMargin)")
	fs.Float64Var(&l.StandardFloor, "standard-floor", l.StandardFloor, "built-in classes: fraction of every budget standard calls leave to interactive")
	fs.Float64Var(&l.BulkFloor, "bulk-floor", l.BulkFloor, "built-in classes: fraction of every budget bulk calls leave to higher classes")
	fs.DurationVar(&l.AgingAfter, "aging", l.AgingAfter, "built-in classes: lift a waiting call one class per this wait (0: never)")
	fs.Var(&f.classes, "class", "define a class `name:rank=N[,weight=W][,floor=F][,aging=D]` (repeat; replaces the built-in classes; as interceptor.Options.Classes)")
	fs.Var(&f.keys, "key", "set a fairness key's `name:weight=W[,share=S][,tpd=N]` (repeat; as interceptor.Options.Fairness)")
	fs.IntVar(&f.c.Calls, "calls", f.c.Calls, "without -workload: number of calls")
	fs.Float64Var(&f.c.Rate, "arrivals", f.c.Rate, "without -workload: calls arriving per second (0: all at once)")
	fs.Int64Var(&f.c.Input, "input", f.c.Input, "without -workload: input tokens per call")
	fs.Int64Var(&f.c.MaxTokens, "max-tokens", f.c.MaxTokens, "without -workload: max_tokens per call")
	fs.Int64Var(&f.c.Output, "output", f.c.Output, "without -workload: output tokens each call produces")
	fs.DurationVar(&f.c.Latency, "latency", f.c.Latency, "provider latency per call (a workload's call may state its own)")
	fs.DurationVar(&f.c.ProviderWindow, "provider-window", f.c.ProviderWindow, "the simulated provider's bucket as time at its full rate (1m: a whole minute; 1s: enforced per second)")
	fs.BoolVar(&f.c.Headers, "headers", f.c.Headers, "feed the provider's remaining back to the store after each answer, as the gate does with rate-limit headers")
	fs.BoolVar(&f.asJSON, "json", f.asJSON, "print the report as one JSON object (simReport) instead of tables")
	fs.StringVar(&f.plot, "plot", f.plot, "write the provider's remaining over time to `file` (.svg: a chart; .html: a page with the chart and the summary)")
}

// defaultSimFlags are simulate's defaults.
func defaultSimFlags() simFlags {
	return simFlags{
		provider: "openai",
		c: simConfig{
			Limits: capacity.Limits{Burst: capacity.DefaultBurst, SafetyMargin: capacity.DefaultSafetyMargin},
			Calls:  1000, Input: 1000, MaxTokens: 500, Output: 250, Latency: 2 * time.Second, ProviderWindow: time.Minute,
		},
	}
}

func simulate(args []string, stdout, stderr io.Writer) error {
	f := defaultSimFlags()
	fs := newFlagSet("simulate", simulateUsage, stderr, false)
	f.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tollgate simulate: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	if f.config != "" {
		// The file's settings, then the flags given over them.
		base := defaultSimFlags()
		if err := loadSimConfig(f.config, &base); err != nil {
			return err
		}
		base.config = f.config
		fs = newFlagSet("simulate", simulateUsage, stderr, false)
		base.register(fs)
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		f = base
	}
	c, err := f.simConfig()
	if err != nil {
		return err
	}
	r, err := runSimulation(c)
	if err != nil {
		return err
	}
	var summary bytes.Buffer
	if err := printSimulation(&summary, c, r); err != nil {
		return err
	}
	if f.plot != "" {
		if err := writePlot(f.plot, r, summary.String()); err != nil {
			return err
		}
	}
	if f.asJSON {
		return writeJSON(stdout, r)
	}
	if _, err := stdout.Write(summary.Bytes()); err != nil {
		return err
	}
	if f.plot != "" {
		_, err = fmt.Fprintf(stdout, "plot           %s\n", f.plot)
	}
	return err
}

// simConfig returns the simulation the flags describe, reading the
// workload file.
func (f *simFlags) simConfig() (simConfig, error) {
	c := f.c
	c.Provider = capacity.Provider(f.provider)
	if _, ok := accounting.ProfileFor(c.Provider); !ok {
		return c, fmt.Errorf("unknown provider %q (openai, anthropic, gemini)", f.provider)
	}
	if len(f.classes) > 0 {
		c.Classes = f.classes
	}
	if len(f.keys) > 0 {
		c.Fairness = map[string]capacity.Fairness(f.keys)
	}
	if f.workload != "" {
		var (
			in   io.Reader = os.Stdin
			name           = "standard input"
		)
		if f.workload != "-" {
			file, err := os.Open(f.workload)
			if err != nil {
				return c, err
			}
			defer file.Close()
			in, name = file, f.workload
		}
		calls, err := readWorkload(in, name)
		if err != nil {
			return c, err
		}
		c.Workload = calls
	}
	return c, nil
}

// simFile is the -config file of simulate.
type simFile struct {
	Provider string `json:"provider"`
	Limits   struct {
		RPM           int64        `json:"rpm"`
		TPM           int64        `json:"tpm"`
		ITPM          int64        `json:"itpm"`
		OTPM          int64        `json:"otpm"`
		RPD           int64        `json:"rpd"`
		TPD           int64        `json:"tpd"`
		InFlight      int64        `json:"inflight"`
		Burst         flexDuration `json:"burst"`
		TokenBurst    int64        `json:"token_burst"`
		Margin        float64      `json:"margin"`
		StandardFloor float64      `json:"standard_floor"`
		BulkFloor     float64      `json:"bulk_floor"`
		Aging         flexDuration `json:"aging"`
	} `json:"limits"`
	Classes []struct {
		Name   string       `json:"name"`
		Rank   int          `json:"rank"`
		Weight float64      `json:"weight"`
		Floor  float64      `json:"floor"`
		Aging  flexDuration `json:"aging"`
	} `json:"classes"`
	Fairness map[string]struct {
		Weight       float64 `json:"weight"`
		Share        float64 `json:"share"`
		TokensPerDay int64   `json:"tokens_per_day"`
	} `json:"fairness"`
	Latency        flexDuration `json:"latency"`
	ProviderWindow flexDuration `json:"provider_window"`
	Headers        bool         `json:"headers"`
}

// loadSimConfig reads the -config file path over f: the fields the file
// sets replace f's. Unknown fields are refused.
func loadSimConfig(path string, f *simFlags) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var file simFile
	l := f.c.Limits
	file.Provider = f.provider
	file.Limits.RPM, file.Limits.TPM, file.Limits.ITPM, file.Limits.OTPM = l.RequestsPerMinute, l.TokensPerMinute, l.InputTokensPerMinute, l.OutputTokensPerMinute
	file.Limits.RPD, file.Limits.TPD, file.Limits.InFlight = l.RequestsPerDay, l.TokensPerDay, l.MaxInFlight
	file.Limits.Burst, file.Limits.TokenBurst, file.Limits.Margin = flexDuration(l.Burst), l.TokenBurst, l.SafetyMargin
	file.Limits.StandardFloor, file.Limits.BulkFloor, file.Limits.Aging = l.StandardFloor, l.BulkFloor, flexDuration(l.AgingAfter)
	file.Latency, file.ProviderWindow, file.Headers = flexDuration(f.c.Latency), flexDuration(f.c.ProviderWindow), f.c.Headers
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return fmt.Errorf("%s: %v", filepath.Base(path), err)
	}
	f.provider = file.Provider
	fl := file.Limits
	f.c.Limits = capacity.Limits{RequestsPerMinute: fl.RPM, TokensPerMinute: fl.TPM, InputTokensPerMinute: fl.ITPM, OutputTokensPerMinute: fl.OTPM,
		RequestsPerDay: fl.RPD, TokensPerDay: fl.TPD, MaxInFlight: fl.InFlight, Burst: time.Duration(fl.Burst), TokenBurst: fl.TokenBurst,
		SafetyMargin: fl.Margin, StandardFloor: fl.StandardFloor, BulkFloor: fl.BulkFloor, AgingAfter: time.Duration(fl.Aging)}
	for _, cd := range file.Classes {
		f.classes = append(f.classes, capacity.ClassDef{Name: cd.Name, Rank: cd.Rank, Weight: cd.Weight, Floor: cd.Floor, AgingAfter: time.Duration(cd.Aging)})
	}
	for key, fa := range file.Fairness {
		if f.keys == nil {
			f.keys = keyFlag{}
		}
		f.keys[key] = capacity.Fairness{Weight: fa.Weight, Share: fa.Share, TokensPerDay: fa.TokensPerDay}
	}
	f.c.Latency, f.c.ProviderWindow, f.c.Headers = time.Duration(file.Latency), time.Duration(file.ProviderWindow), file.Headers
	return nil
}

// classFlag is the repeatable -class flag: class definitions, a later one
// replacing an earlier one of the same name.
type classFlag []capacity.ClassDef

func (c *classFlag) String() string { return fmt.Sprint(len(*c), " classes") }

func (c *classFlag) Set(s string) error {
	name, fields, err := nameAndFields(s)
	if err != nil {
		return err
	}
	d := capacity.ClassDef{Name: name}
	rank := false
	for k, v := range fields {
		switch k {
		case "rank":
			d.Rank, err = strconv.Atoi(v)
			rank = true
		case "weight":
			d.Weight, err = strconv.ParseFloat(v, 64)
		case "floor":
			d.Floor, err = strconv.ParseFloat(v, 64)
		case "aging":
			d.AgingAfter, err = time.ParseDuration(v)
		default:
			return fmt.Errorf("unknown field %q (rank, weight, floor, aging)", k)
		}
		if err != nil {
			return fmt.Errorf("%s: %v", k, err)
		}
	}
	if !rank {
		return errors.New("rank= is required")
	}
	for i := range *c {
		if (*c)[i].Name == name {
			(*c)[i] = d
			return nil
		}
	}
	*c = append(*c, d)
	return nil
}

// keyFlag is the repeatable -key flag: fairness settings by key.
type keyFlag map[string]capacity.Fairness

func (k *keyFlag) String() string { return fmt.Sprint(len(*k), " keys") }

func (k *keyFlag) Set(s string) error {
	name, fields, err := nameAndFields(s)
	if err != nil {
		return err
	}
	var f capacity.Fairness
	for key, v := range fields {
		switch key {
		case "weight":
			f.Weight, err = strconv.ParseFloat(v, 64)
		case "share":
			f.Share, err = strconv.ParseFloat(v, 64)
		case "tpd":
			f.TokensPerDay, err = strconv.ParseInt(v, 10, 64)
		default:
			return fmt.Errorf("unknown field %q (weight, share, tpd)", key)
		}
		if err != nil {
			return fmt.Errorf("%s: %v", key, err)
		}
	}
	if *k == nil {
		*k = keyFlag{}
	}
	(*k)[name] = f
	return nil
}

// nameAndFields splits "name:a=1,b=2".
func nameAndFields(s string) (string, map[string]string, error) {
	name, rest, _ := strings.Cut(s, ":")
	if name == "" {
		return "", nil, errors.New("want name:field=value[,field=value]")
	}
	fields := map[string]string{}
	for kv := range strings.SplitSeq(rest, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return "", nil, fmt.Errorf("%q: want field=value", kv)
		}
		fields[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return name, fields, nil
}

func describeLimits(l capacity.Limits) string {
	s := ""
	for _, d := range capacity.Dimensions() {
		if v := l.Limit(d); v > 0 {
			s += fmt.Sprintf("%s=%d ", d, v)
		}
	}
	burst, margin := l.Burst, l.SafetyMargin
	if burst == 0 {
		burst = capacity.DefaultBurst
	}
	if margin == 0 {
		margin = capacity.DefaultSafetyMargin
	}
	return s + fmt.Sprintf("burst=%v margin=%.2f", burst, margin)
}

// printSimulation writes the report as text: the summary, then per class
// and per fairness key where there are several.
func printSimulation(w io.Writer, c simConfig, r simReport) error {
	d := func(s seconds) time.Duration { return time.Duration(s).Round(time.Millisecond) }
	fmt.Fprintf(w, "%d calls (%s accounting) against %s\n", r.Total.Calls, r.Provider, describeLimits(c.Limits))
	fmt.Fprintf(w, "makespan       %v (%.2f calls/s)\n", d(r.Makespan), r.CallsPerSecond)
	fmt.Fprintf(w, "admission wait p50 %v, p95 %v, max %v\n", d(r.Total.WaitP50), d(r.Total.WaitP95), d(r.Total.WaitMax))
	fmt.Fprintf(w, "binding        %s (utilization %.1f%% of the budget used, %.1f%% of the provider's)\n", r.Binding, 100*r.Utilization, 100*r.ProviderUtilization)
	var least []string
	for _, dim := range capacity.Dimensions() {
		if v, ok := r.ProviderMinRemaining[dim.String()]; ok {
			least = append(least, fmt.Sprintf("%s %d/%d (%.1f%%)", dim, v, r.Limits[dim.String()], 100*r.ProviderMinFraction[dim.String()]))
		}
	}
	if len(least) > 0 {
		fmt.Fprintf(w, "provider       %d rate-limit errors (429); least remaining: %s\n", r.RateLimited, strings.Join(least, ", "))
	}
	if len(r.Total.Refused) > 0 {
		fmt.Fprintf(w, "refused        %s\n", refusedString(r.Total.Refused))
	}
	if r.DailyQuotaExhaustion > 0 {
		fmt.Fprintf(w, "daily quota    %d calls refused until the reset\n", r.DailyQuotaExhaustion)
	}
	if len(r.Classes) > 1 || len(r.Keys) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\nGROUP\tCALLS\tDONE\tREFUSED\tWAIT p50\tWAIT p95\tWAIT max\tTOKENS\tSHARE")
		row := func(kind string, g simStats) {
			fmt.Fprintf(tw, "%s %s\t%d\t%d\t%s\t%v\t%v\t%v\t%d\t%.1f%%\n", kind, g.Name, g.Calls, g.Completed, refusedString(g.Refused),
				d(g.WaitP50), d(g.WaitP95), d(g.WaitMax), g.Tokens, 100*g.TokenShare)
		}
		for _, g := range r.Classes {
			row("class", g)
		}
		for _, g := range r.Keys {
			row("key", g)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// refusedString is "3 daily_quota, 1 deadline", or "-".
func refusedString(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

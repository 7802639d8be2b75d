package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/internal/workerproc"
	"github.com/tollgate-dev/tollgate/testsuite"

	"github.com/tollgate-dev/tollgate/testsuite/devserver"
)

func main() {
	if spec, ok := workerproc.Arg(os.Args[1:]); ok {
		if err := workerMain(spec); err != nil {
			log.Fatalln("worker:", err)
		}
		return
	}
	var (
		o                              Options
		strategies, providers, buckets string
		jsonOut                        bool
		htmlPath                       string
		defaultRedis                   = os.Getenv("TOLLGATE_REDIS_ADDR")
	)
	flag.Uint64Var(&o.Workload.Seed, "seed", 1, "workload seed")
	flag.IntVar(&o.Workload.Calls, "calls", 300, "batch calls")
	flag.DurationVar(&o.Workload.Every, "every", 500*time.Millisecond, "time between interactive calls (0: the batch alone)")
	flag.DurationVar(&o.Target, "target", 25*time.Second, "theoretical minimum drain the limits are planned for")
	flag.DurationVar(&o.Timeout, "timeout", 0, "longest drain of one run (default 4 × target)")
	flag.StringVar(&strategies, "strategies", strings.Join(Strategies, ","), "strategies to run (also: "+strings.Join(LimitStrategies, ",")+")")
	flag.StringVar(&providers, "providers", "openai,anthropic", "provider accountings to run")
	flag.StringVar(&buckets, "buckets", "5s,1m", "provider buckets to run (5s, 1m)")
	flag.StringVar(&o.Redis, "redis", defaultRedis, "Redis of tollgate-redis (default $TOLLGATE_REDIS_ADDR)")
	flag.TextVar(&o.HeadersAt, "headers", testsuite.HeadersAtAnswer, "when the fake provider computes its rate-limit headers: answer or admission")
	flag.BoolVar(&jsonOut, "json", false, "print one JSON object per run on stdout (the table goes to stderr)")
	flag.StringVar(&htmlPath, "html", "goodput.html", "where to write the chart")
	flag.Parse()
	if err := o.validate(); err != nil {
		log.Fatalln(err)
	}
	var err error
	if o.Strategies, err = pick(strategies, knownStrategies, func(s string) string { return s }); err != nil {
		log.Fatalln(err)
	}
	if o.Providers, err = pick(providers, Providers, func(p Provider) string { return p.Name }); err != nil {
		log.Fatalln(err)
	}
	if o.Buckets, err = pick(buckets, Buckets, func(b Bucket) string { return b.Name }); err != nil {
		log.Fatalln(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	log.Println("starting a Temporal dev server...")
	// Priority-aware matching: the interactive calls' activity tasks go
	// before the batch's, for every strategy alike.
	srv, err := devserver.StartWith(ctx, nil, devserver.PriorityMatcher...)
	if err != nil {
		log.Fatalln(err)
	}
	defer func() { _ = srv.Stop() }()
	env := &Env{Client: srv.Client(), HostPort: srv.FrontendHostPort(), Namespace: "default", Redis: o.Redis, Log: os.Stderr}
	results, err := Compare(ctx, env, o)
	if err != nil {
		log.Println(err) // report what was measured before it
	}
	table := io.Writer(os.Stdout)
	if jsonOut {
		table = os.Stderr
		if err := writeJSON(os.Stdout, results); err != nil {
			log.Fatalln(err)
		}
	}
	if err := writeTable(table, results); err != nil {
		log.Fatalln(err)
	}
	if err := saveHTML(htmlPath, results); err != nil {
		log.Fatalln(err)
	}
	abs, _ := filepath.Abs(htmlPath)
	log.Println("chart written to", abs)
}

// pick returns the items of all named in the comma-separated list.
func pick[T any](list string, all []T, name func(T) string) ([]T, error) {
	var out []T
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		found := false
		for _, it := range all {
			if name(it) == n {
				out, found = append(out, it), true
			}
		}
		if !found {
			var names []string
			for _, it := range all {
				names = append(names, name(it))
			}
			return nil, fmt.Errorf("unknown %q (want some of %s)", n, strings.Join(names, ","))
		}
	}
	return out, nil
}

func saveHTML(path string, results []Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeHTML(f, results); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Options select the runs of Compare.
type Options struct {
	Workload        Workload
	Target, Timeout time.Duration
	Strategies      []string
	Providers       []Provider
	Buckets         []Bucket
	Redis           string
	// HeadersAt is when the fake provider computes its rate-limit headers
	// (Spec.HeadersAt).
	HeadersAt testsuite.HeadersTime
}

// validate reports the first option Compare cannot run with.
func (o Options) validate() error {
	switch {
	case o.Workload.Calls < 1:
		return fmt.Errorf("-calls is %d; want at least 1", o.Workload.Calls)
	case o.Workload.Every < 0:
		return fmt.Errorf("-every is %v; want 0 (no interactive calls) or more", o.Workload.Every)
	case o.Target <= 0:
		return fmt.Errorf("-target is %v; want more than 0", o.Target)
	case o.Timeout < 0:
		return fmt.Errorf("-timeout is %v; want 0 (4 × target) or more", o.Timeout)
	}
	return nil
}

// Compare runs every selected strategy for every selected provider and
// bucket, in that nesting, and returns the results of the runs made; a run
// that cannot be made here (ErrSkipped) is reported on env.Log and left
// out, and one that fails is reported there too, the others still made,
// and returned in the error.
func Compare(ctx context.Context, env *Env, o Options) ([]Result, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	var (
		results  []Result
		failures []error
	)
	for _, p := range o.Providers {
		for _, b := range o.Buckets {
			fmt.Fprintf(env.Log, "%s, %s buckets: %s\n", p.Name, b.Name, describe(Plan(p, b, o.Workload, o.Target)))
			for _, s := range o.Strategies {
				start := time.Now()
				r, err := run(ctx, env, Spec{Strategy: s, Provider: p, Bucket: b, Workload: o.Workload, Target: o.Target, Timeout: o.Timeout, HeadersAt: o.HeadersAt})
				if errors.Is(err, ErrSkipped) {
					fmt.Fprintf(env.Log, "  %-15s skipped: %v\n", s, err)
					continue
				}
				if err != nil {
					err = fmt.Errorf("%s %s %s: %w", s, p.Name, b.Name, err)
					fmt.Fprintf(env.Log, "  %-15s failed: %v\n", s, err)
					failures = append(failures, err)
					continue
				}
				row := r.Row()
				fmt.Fprintf(env.Log, "  %-15s %d/%d completed, %d requests, %d × 429, drain ratio %.3f, utilization %.3f, interactive p99 %s (%s)\n",
					s, row.Completed, row.Calls, row.ProviderRequests, row.Provider429s, row.DrainRatio, row.Utilization, interactiveP99(r),
					time.Since(start).Round(time.Second))
				results = append(results, r)
			}
		}
	}
	return results, errors.Join(failures...)
}

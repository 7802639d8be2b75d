package main

import (
	"context"
	"flag"
	"io"
	"log"
	"os"
	"os/signal"

	"github.com/tollgate-dev/tollgate/capacity/redisstore"
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
		o       Options
		redis   string
		workers int
		jsonOut bool
		short   bool
		csvPath string
		engine  redisstore.Engine
	)
	flag.Uint64Var(&o.Seed, "seed", 1, "workload seed")
	flag.StringVar(&redis, "redis", "", "run the workers as -workers processes sharing a Redis store at this address (such as $TOLLGATE_REDIS_ADDR); default: one worker on a memory store")
	flag.IntVar(&workers, "workers", 4, "worker processes with -redis")
	flag.TextVar(&engine, "engine", redisstore.EngineRecords, "the Redis store's engine with -redis: records or scripts")
	flag.BoolVar(&jsonOut, "json", false, "print one JSON object on stdout (the table goes to stderr)")
	flag.BoolVar(&short, "short", false, "short phases (D at +6 s, 6 s more) instead of +12 s and 18 s")
	flag.DurationVar(&o.Timeout, "timeout", 0, "longest wait for the first tenant to drain (default 3 × the planned length)")
	flag.TextVar(&o.HeadersAt, "headers", testsuite.HeadersAtAnswer, "when the fake provider computes its rate-limit headers: answer or admission")
	flag.StringVar(&csvPath, "csv", "", "also write the fake provider's record, one request a line, to this file")
	flag.Parse()
	o.Phases = FullPhases
	if short {
		o.Phases = ShortPhases
	}
	if workers < 1 {
		log.Fatalln("-workers must be at least 1")
	}

	if err := run(o, redis, workers, engine, jsonOut, csvPath); err != nil {
		log.Fatalln(err)
	}
}

// run starts a dev server, makes the run and prints it.
func run(o Options, redis string, workers int, engine redisstore.Engine, jsonOut bool, csvPath string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	log.Println("starting a Temporal dev server...")
	// Priority-aware matching: interactive activity tasks go before bulk ones.
	srv, err := devserver.StartWith(ctx, nil, devserver.FairnessMatcher...)
	if err != nil {
		return err
	}
	defer func() { _ = srv.Stop() }()
	env := &Env{Client: srv.Client(), HostPort: srv.FrontendHostPort(), Namespace: "default", Redis: redis, Workers: workers, Engine: engine, Log: os.Stderr}
	r, err := Run(ctx, env, o)
	if err != nil {
		return err
	}
	table := io.Writer(os.Stdout)
	if jsonOut {
		table = os.Stderr
		if err := writeJSON(os.Stdout, r); err != nil {
			return err
		}
	}
	if err := writeTable(table, r); err != nil {
		return err
	}
	if csvPath == "" {
		return nil
	}
	f, err := os.Create(csvPath)
	if err != nil {
		return err
	}
	if err := writeCSV(f, r); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Command demo runs the whole sample in one process against a real Temporal
// dev server (the temporal CLI that `make temporal` builds) and a fake
// provider: a nightly batch and an interactive assistant sharing one quota,
// with live progress and a final report, also written as an HTML page with
// charts (-report). `make demo` runs it.
//
// With -redis (default $TOLLGATE_REDIS_ADDR, which `make demo` sets) the
// budget and the cost ledger are kept in Redis under -prefix, emptied at
// the start, so `tollgate cost -redis ADDR -prefix tollgate-demo` shows
// the run's spend afterwards; without, in memory.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	ab "github.com/tollgate-dev/tollgate/samples/assistant-batch"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
)

func main() {
	var o ab.DemoOptions
	flag.IntVar(&o.Docs, "docs", 300, "documents in the nightly batch")
	flag.IntVar(&o.Questions, "questions", 30, "questions the assistant answers meanwhile")
	flag.DurationVar(&o.Every, "every", 500*time.Millisecond, "time between questions")
	flag.BoolVar(&o.NoFloors, "no-floors", false, "run without class floors, to compare")
	addr := flag.String("redis", os.Getenv("TOLLGATE_REDIS_ADDR"), "Redis address host:port for the budget and the cost ledger (env TOLLGATE_REDIS_ADDR); empty: in memory")
	prefix := flag.String("prefix", "tollgate-demo", "key prefix in Redis; its keys are deleted at the start")
	report := flag.String("report", "demo-report.html", "where to write the HTML report; empty: none")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *addr != "" {
		rdb := redis.NewClient(&redis.Options{Addr: *addr})
		defer rdb.Close()
		if err := ab.ClearPrefix(ctx, rdb, *prefix); err != nil {
			log.Printf("Redis at %s: %v; keeping the budget and the cost ledger in memory", *addr, err)
		} else {
			store, err := redisstore.New(rdb, redisstore.Options{Prefix: *prefix})
			if err != nil {
				log.Fatalln(err)
			}
			defer store.Close()
			o.Store = store
		}
	}
	log.Println("starting a Temporal dev server...")
	srv, err := devserver.Start(ctx, nil)
	if err != nil {
		log.Fatalln(err)
	}
	defer func() { _ = srv.Stop() }()
	r, err := ab.RunDemo(ctx, srv.Client(), o, os.Stdout)
	if err != nil {
		log.Fatalln(err)
	}
	r.Print(os.Stdout, o)
	if o.Store != nil {
		log.Printf("the cost ledger is in Redis: go run ./cmd/tollgate cost -redis %s -prefix %s [-json]", *addr, *prefix)
	}
	if *report == "" {
		return
	}
	path, err := r.SaveHTML(*report, o)
	if err != nil {
		_ = srv.Stop()
		log.Fatalln(err)
	}
	fmt.Printf("\nHTML report: %s\n", path)
}

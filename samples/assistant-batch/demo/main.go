// Command demo runs the whole sample in one process against a real Temporal
// dev server (the temporal CLI that `make temporal` builds) and a fake
// provider: a nightly batch and an interactive assistant sharing one quota,
// with live progress and a final report, also written as an HTML page with
// charts (-report). `make demo` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	ab "github.com/tollgate-dev/tollgate/samples/assistant-batch"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
)

func main() {
	var o ab.DemoOptions
	flag.IntVar(&o.Docs, "docs", 300, "documents in the nightly batch")
	flag.IntVar(&o.Questions, "questions", 30, "questions the assistant answers meanwhile")
	flag.DurationVar(&o.Every, "every", 500*time.Millisecond, "time between questions")
	flag.BoolVar(&o.NoFloors, "no-floors", false, "run without class floors, to compare")
	report := flag.String("report", "demo-report.html", "where to write the HTML report; empty: none")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
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

// Command starter starts the sample's nightly batch and asks the assistant
// one question while it runs. It dials Temporal at TEMPORAL_ADDRESS (default
// localhost:7233).
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"time"

	"go.temporal.io/sdk/client"

	ab "github.com/tollgate-dev/tollgate/samples/assistant-batch"
)

func main() {
	docs := flag.Int("docs", 300, "documents in the batch")
	flag.Parse()
	c, err := client.Dial(client.Options{HostPort: os.Getenv("TEMPORAL_ADDRESS")})
	if err != nil {
		log.Fatalln("unable to connect to Temporal:", err)
	}
	defer c.Close()
	ctx := context.Background()
	batch, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: ab.BatchQueue}, ab.BatchClassifyWorkflow, *docs)
	if err != nil {
		log.Fatalln(err)
	}
	start := time.Now()
	var answer string
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: ab.InteractiveQueue}, ab.AssistantWorkflow, "How do I export a report?")
	if err == nil {
		err = run.Get(ctx, &answer)
	}
	log.Printf("assistant answered in %v: %.60q (err %v)", time.Since(start).Round(time.Millisecond), answer, err)
	var r ab.BatchResult
	if err := batch.Get(ctx, &r); err != nil {
		log.Fatalln(err)
	}
	log.Printf("batch: %d classified, %d failed", r.Classified, r.Failed)
}

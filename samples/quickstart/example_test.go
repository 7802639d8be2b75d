package main

import (
	"context"
	"fmt"
	"log"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/testsuite"
	"github.com/tollgate-dev/tollgate/testsuite/devserver"
)

// Example runs the quick start: its worker and its Ask workflow, wired as
// main wires them, on a real Temporal dev server, with the activities
// sent to the fake provider instead of OpenAI and Anthropic (its default
// models are the quick start's).
func Example() {
	ctx := context.Background()
	fp, err := testsuite.New(testsuite.Options{})
	if err != nil {
		log.Fatalln(err)
	}
	defer fp.Close()
	srv, err := devserver.Start(ctx, devserver.QuietLogger())
	if err != nil {
		fmt.Println(err) // devserver.ErrNoCLI: install it with `make temporal`
		return
	}
	defer func() { _ = srv.Stop() }()
	c := srv.Client()

	plugin, err := interceptor.NewPlugin(interceptor.Options{Store: capacity.NewMemoryStore(capacity.MemoryOptions{})})
	if err != nil {
		log.Fatalln(err)
	}
	w := worker.New(c, "llm", worker.Options{Plugins: []worker.Plugin{plugin}})
	keys := activities.StaticCredentials{"team-a": testsuite.DefaultKey}
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{Credentials: keys, BaseURL: fp.OpenAIBaseURL()})
	if err != nil {
		log.Fatalln(err)
	}
	an, err := activities.NewAnthropic(activities.AnthropicOptions{Credentials: keys, BaseURL: fp.AnthropicBaseURL()})
	if err != nil {
		log.Fatalln(err)
	}
	w.RegisterActivity(oa)
	w.RegisterActivity(an)
	w.RegisterWorkflow(Ask)
	if err := w.Start(); err != nil {
		log.Fatalln(err)
	}
	defer w.Stop()

	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "llm"}, Ask, "What is a token bucket?")
	if err != nil {
		log.Fatalln(err)
	}
	var answer string
	err = run.Get(ctx, &answer)
	fmt.Println("answered:", err == nil && answer != "")
	fmt.Println("calls the provider served:", len(fp.Entries()))
	// Output:
	// answered: true
	// calls the provider served: 1
}

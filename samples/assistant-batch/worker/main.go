// Command worker runs the sample's workers: one per class, one shared budget.
// It expects a Temporal server on localhost:7233 and an OpenAI-compatible API
// at OPENAI_BASE_URL with the key in OPENAI_API_KEY_DEFAULT.
package main

import (
	"log"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/interceptor"
	ab "github.com/tollgate-dev/tollgate/samples/assistant-batch"
)

func main() {
	c, err := client.Dial(client.Options{})
	if err != nil {
		log.Fatalln("unable to connect to Temporal:", err)
	}
	defer c.Close()
	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store:  capacity.NewMemoryStore(capacity.MemoryOptions{}), // one process; use redisstore for many
		Limits: func(capacity.Scope) (capacity.Limits, bool) { return ab.Limits, true },
	})
	if err != nil {
		log.Fatalln(err)
	}
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{
		Credentials: activities.EnvCredentials{Prefix: "OPENAI_API_KEY_"}, BaseURL: os.Getenv("OPENAI_BASE_URL"),
	})
	if err != nil {
		log.Fatalln(err)
	}
	for _, queue := range []string{ab.InteractiveQueue, ab.BatchQueue} {
		w := worker.New(c, queue, worker.Options{Plugins: []worker.Plugin{plugin}})
		w.RegisterWorkflow(ab.AssistantWorkflow)
		w.RegisterWorkflow(ab.BatchClassifyWorkflow)
		w.RegisterActivity(oa)
		if err := w.Start(); err != nil {
			log.Fatalln(err)
		}
		defer w.Stop()
	}
	<-worker.InterruptCh()
}

// Command worker runs the sample's workers: one per class, one shared budget.
// It dials Temporal at TEMPORAL_ADDRESS (default localhost:7233) and calls an
// OpenAI-compatible API at OPENAI_BASE_URL with the key in
// OPENAI_API_KEY_DEFAULT. With REDIS_URL set (redis://host:6379/0) the budget
// is held in Redis and shared by every worker using it; without, in memory.
package main

import (
	"log"
	"os"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	"github.com/tollgate-dev/tollgate/interceptor"
	ab "github.com/tollgate-dev/tollgate/samples/assistant-batch"
)

func main() {
	c, err := client.Dial(client.Options{HostPort: os.Getenv("TEMPORAL_ADDRESS")})
	if err != nil {
		log.Fatalln("unable to connect to Temporal:", err)
	}
	defer c.Close()
	var store capacity.Store = capacity.NewMemoryStore(capacity.MemoryOptions{}) // one process
	if url := os.Getenv("REDIS_URL"); url != "" {
		ro, err := redis.ParseURL(url)
		if err != nil {
			log.Fatalln("REDIS_URL:", err)
		}
		rs, err := redisstore.New(redis.NewClient(ro), redisstore.Options{}) // every worker on this Redis
		if err != nil {
			log.Fatalln(err)
		}
		defer rs.Close()
		store = rs
	}
	plugin, err := interceptor.NewPlugin(interceptor.Options{
		Store:  store,
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

// Command quickstart is the README's quick start: a worker with the tollgate
// plugin and a workflow whose model call the gate admits, falling back to
// Anthropic when OpenAI's quota is spent. It needs a Temporal server
// (temporal server start-dev) and OPENAI_API_KEY_TEAM_A and
// ANTHROPIC_API_KEY_TEAM_A.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/interceptor"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Ask answers a question with gpt-4o-mini, or Claude when OpenAI's quota
// is spent.
func Ask(ctx workflow.Context, question string) (string, error) {
	msgs := []activities.Message{{Role: "user", Content: question}}
	var res activities.Result
	_, err := workflows.CallModel(ctx, workflows.Options{SleepUntilReset: time.Hour}, capacity.Interactive,
		[]workflows.Call{
			{Activity: "Chat", Input: activities.OpenAIChatRequest{Model: "gpt-4o-mini", Credential: "team-a", MaxTokens: 512, Messages: msgs}},
			{Activity: "Messages", Input: activities.AnthropicMessagesRequest{Model: "claude-sonnet-4-5", Credential: "team-a", MaxTokens: 512, Messages: msgs}},
		}, &res)
	if tgerrors.IsQuotaExhausted(err) {
		d, _ := tgerrors.DetailsOf(err)
		return "", fmt.Errorf("every quota is spent until %v: %w", d.ResetAt, err)
	}
	return res.Text, err
}

func main() {
	c, err := client.Dial(client.Options{})
	if err != nil {
		log.Fatalln(err)
	}
	defer c.Close()
	// One process: a memory store. Many workers: redisstore.New(rdb, redisstore.Options{}).
	// No Limits: each scope runs on the limits its provider reports.
	plugin, err := interceptor.NewPlugin(interceptor.Options{Store: capacity.NewMemoryStore(capacity.MemoryOptions{})})
	if err != nil {
		log.Fatalln(err)
	}
	w := worker.New(c, "llm", worker.Options{Plugins: []worker.Plugin{plugin}})
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{Credentials: activities.EnvCredentials{Prefix: "OPENAI_API_KEY_"}})
	if err != nil {
		log.Fatalln(err)
	}
	an, err := activities.NewAnthropic(activities.AnthropicOptions{Credentials: activities.EnvCredentials{Prefix: "ANTHROPIC_API_KEY_"}})
	if err != nil {
		log.Fatalln(err)
	}
	w.RegisterActivity(oa) // Chat, ChatCompletion, ChatCompletionStream, Response, Embeddings
	w.RegisterActivity(an) // Messages, CreateMessage
	w.RegisterWorkflow(Ask)
	if err := w.Start(); err != nil {
		log.Fatalln(err)
	}
	defer w.Stop()

	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{TaskQueue: "llm"}, Ask, "What is a token bucket?")
	if err != nil {
		log.Fatalln(err)
	}
	var answer string
	if err := run.Get(context.Background(), &answer); err != nil {
		log.Fatalln(err)
	}
	fmt.Println(answer)
}

// Package assistantbatch is tollgate's sample: an interactive assistant and
// a nightly batch classifier sharing one provider quota. The batch runs as
// bulk work, the assistant as interactive work; with class floors in the
// limits, the assistant's calls are not queued behind the batch.
package assistantbatch

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Task queues of the two classes, each served by its own workers.
const (
	InteractiveQueue = "llm-interactive"
	BatchQueue       = "llm-batch"
	Model            = "gpt-4o-mini"
	Credential       = "default"
)

// Options routes each class to its task queue; the batch may wait long.
var Options = workflows.Options{
	TaskQueues:      map[capacity.Class]string{capacity.Interactive: InteractiveQueue, capacity.Bulk: BatchQueue},
	ScheduleToClose: 30 * time.Minute,
	StartToClose:    time.Minute,
}

// AssistantWorkflow answers one question as interactive work.
func AssistantWorkflow(ctx workflow.Context, question string) (string, error) {
	var res activities.Result
	_, err := workflows.CallModel(ctx, Options, capacity.Interactive, []workflows.Call{{
		Activity: "Chat",
		Input: activities.OpenAIChatRequest{
			Model: Model, Credential: Credential, MaxTokens: 200, Class: capacity.Interactive,
			Messages: []activities.Message{{Role: "user", Content: question}},
		},
	}}, &res)
	return res.Text, err
}

// BatchResult counts what the batch did.
type BatchResult struct {
	Classified, Failed int
}

// BatchClassifyWorkflow classifies n documents as bulk work, all at once:
// the gate paces them to the quota.
func BatchClassifyWorkflow(ctx workflow.Context, n int) (BatchResult, error) {
	futures := make([]workflow.Future, n)
	for i := range futures {
		f, settable := workflow.NewFuture(ctx)
		futures[i] = f
		workflow.Go(ctx, func(ctx workflow.Context) {
			var res activities.Result
			_, err := workflows.CallModel(ctx, Options, capacity.Bulk, []workflows.Call{{
				Activity: "Chat",
				Input: activities.OpenAIChatRequest{
					Model: Model, Credential: Credential, MaxTokens: 100, Class: capacity.Bulk,
					Messages: []activities.Message{{Role: "user", Content: Document(i)}},
				},
			}}, &res)
			settable.Set(nil, err)
		})
	}
	var r BatchResult
	for _, f := range futures {
		if err := f.Get(ctx, nil); err != nil {
			r.Failed++
		} else {
			r.Classified++
		}
	}
	return r, nil
}

// Document is the i-th document of the sample batch.
func Document(i int) string {
	return fmt.Sprintf("Classify the sentiment of support ticket #%d: the export finished, but the report it produced was empty and nobody was told.", i)
}

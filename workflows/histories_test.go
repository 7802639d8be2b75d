package workflows_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	ab "github.com/tollgate-dev/tollgate/samples/assistant-batch"
	"github.com/tollgate-dev/tollgate/testsuite"
	"github.com/tollgate-dev/tollgate/workflows"
)

// The replay histories: one per CallModel recovery path and one per sample
// workflow, recorded on a dev server by TestRecordHistories (make
// histories) and replayed by TestReplayHistories with no server.
const historiesDir = "testdata/histories"

// Names of the recorded histories (historiesDir/<name>.json).
const (
	histRateLimited      = "rate_limited"       // a provider 429: the activity retried after its delay
	histSleepUntilReset  = "sleep_until_reset"  // a quota exhausted with a near reset: a durable timer, the same call
	histFallback         = "fallback"           // the first connection's quota spent: the second answers
	histPauseUntilSignal = "pause_until_signal" // a quota with no reset: paused until a signal
	histAssistant        = "assistant"          // the sample's AssistantWorkflow
	histBatchClassify    = "batch_classify"     // the sample's BatchClassifyWorkflow
)

var historyNames = []string{
	histRateLimited, histSleepUntilReset, histFallback, histPauseUntilSignal, histAssistant, histBatchClassify,
}

func historyPath(name string) string { return filepath.Join(historiesDir, name+".json") }

// Models and credential name of the recorded calls. Histories hold the
// credential's name, never its key.
const (
	chatModel     = testsuite.DefaultOpenAIModel
	messagesModel = testsuite.DefaultAnthropicModel
	credential    = "default"
	resumeSignal  = "quota-restored"
)

// prompt is neutral text: histories are committed.
var prompt = []activities.Message{{Role: "user", Content: "Summarize in one sentence: the weekly report lists three finished tasks."}}

func chatCall() workflows.Call {
	return workflows.Call{Activity: "Chat", Input: activities.OpenAIChatRequest{Model: chatModel, Credential: credential, MaxTokens: 20, Messages: prompt}}
}

func messagesCall() workflows.Call {
	return workflows.Call{Activity: "Messages", Input: activities.AnthropicMessagesRequest{Model: messagesModel, Credential: credential, MaxTokens: 20, Messages: prompt}}
}

// callText runs CallModel and returns "<index used>:<model>".
func callText(ctx workflow.Context, opts workflows.Options, chain ...workflows.Call) (string, error) {
	var res activities.Result
	used, err := workflows.CallModel(ctx, opts, capacity.Standard, chain, &res)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%s", used, res.Model), nil
}

// RateLimitedWorkflow makes one call; the provider answers 429 with a short
// retry-after, and the activity is retried after that delay.
func RateLimitedWorkflow(ctx workflow.Context) (string, error) {
	return callText(ctx, workflows.Options{ScheduleToClose: 2 * time.Minute}, chatCall())
}

// SleepUntilResetWorkflow makes one call whose quota is exhausted with a
// reset seconds away: CallModel sleeps until the reset and calls again.
func SleepUntilResetWorkflow(ctx workflow.Context) (string, error) {
	return callText(ctx, workflows.Options{ScheduleToClose: 2 * time.Minute, SleepUntilReset: time.Minute}, chatCall())
}

// FallbackWorkflow asks OpenAI, whose quota is spent, then Anthropic.
func FallbackWorkflow(ctx workflow.Context) (string, error) {
	return callText(ctx, workflows.Options{ScheduleToClose: 2 * time.Minute}, chatCall(), messagesCall())
}

// PauseUntilSignalWorkflow makes one call whose quota is spent with no reset:
// CallModel pauses until resumeSignal and calls again.
func PauseUntilSignalWorkflow(ctx workflow.Context) (string, error) {
	return callText(ctx, workflows.Options{ScheduleToClose: 2 * time.Minute, PauseSignal: resumeSignal}, chatCall())
}

// registerWorkflows registers every workflow of the recorded histories.
func registerWorkflows(r worker.WorkflowRegistry) {
	r.RegisterWorkflow(RateLimitedWorkflow)
	r.RegisterWorkflow(SleepUntilResetWorkflow)
	r.RegisterWorkflow(FallbackWorkflow)
	r.RegisterWorkflow(PauseUntilSignalWorkflow)
	r.RegisterWorkflow(ab.AssistantWorkflow)
	r.RegisterWorkflow(ab.BatchClassifyWorkflow)
}

// forbidden are strings a committed history must not hold, in its JSON or
// in its base64 payloads: API keys and what carries them.
var forbidden = []string{testsuite.DefaultKey, "sk-", "Bearer ", "x-api-key:", "Authorization"}

// historySecret returns the first forbidden string found in the history
// JSON b, decoding every base64 string (payload data and metadata) too.
func historySecret(b []byte) (string, error) {
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return "", err
	}
	texts := []string{string(b)}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case string:
			if d, err := base64.StdEncoding.DecodeString(v); err == nil {
				texts = append(texts, string(d))
			}
		}
	}
	walk(doc)
	for _, text := range texts {
		for _, f := range forbidden {
			if strings.Contains(text, f) {
				return f, nil
			}
		}
	}
	return "", nil
}

func historySecretInFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return historySecret(b)
}

package activities

import (
	"context"
	"fmt"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.temporal.io/sdk/activity"

	"github.com/tollgate-dev/tollgate/capacity"
)

// ChatCompletionStream sends the request as a stream, with
// stream_options.include_usage on and SDK retries off: it hands each text
// delta to ClientOptions.Sink, heartbeats as it reads, and returns the
// completion the stream adds up to, settled as ChatCompletion's is, by the
// usage in the stream's last event (a stream without it keeps the whole
// reservation). A stream cut mid-way fails the attempt like an answer lost:
// its outcome is unknown and it keeps its whole reservation. Errors are
// handled as Chat's.
func (a *OpenAI) ChatCompletionStream(ctx context.Context, req OpenAIChatCompletionRequest) (OpenAIChatCompletionResult, error) {
	key, err := a.opts.prepare(ctx, "openai chat completion stream", req.validate(), req.Credential)
	if err != nil {
		return OpenAIChatCompletionResult{}, err
	}
	client := openai.NewClient(a.opts.OpenAIRequestOptions(key)...)
	params := req.Params
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	var resp *http.Response
	stream := client.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&resp))
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx)
		}
		if a.opts.Sink == nil || len(chunk.Choices) == 0 || chunk.Choices[0].Delta.Content == "" {
			continue
		}
		if err := a.opts.Sink(ctx, chunk.Choices[0].Delta.Content); err != nil {
			return OpenAIChatCompletionResult{}, fmt.Errorf("openai chat completion stream: the sink refused a delta: %w", err)
		}
	}
	if err := stream.Err(); err != nil {
		return OpenAIChatCompletionResult{}, providerError(ctx, capacity.OpenAI, err)
	}
	if len(acc.Choices) == 0 {
		return OpenAIChatCompletionResult{}, providerError(ctx, capacity.OpenAI, malformedAnswer("openai chat completion stream", "a stream of chunks with a choice"))
	}
	res := OpenAIChatCompletionResult{Completion: acc.ChatCompletion, Usage: OpenAIUsage(acc.Usage), UsageMissing: acc.Usage.TotalTokens == 0}
	if resp != nil {
		res.Header = RateLimitHeaders(resp.Header)
	}
	return res, nil
}

// CreateMessageStream sends the request as a stream with SDK retries off:
// it hands each text delta to ClientOptions.Sink, heartbeats as it reads,
// and returns the message the events add up to, settled as
// CreateMessage's is: input from message_start, output from the last
// message_delta. A stream cut mid-way is an answer lost, as for
// ChatCompletionStream.
func (a *Anthropic) CreateMessageStream(ctx context.Context, req AnthropicMessageRequest) (AnthropicMessageResult, error) {
	key, err := a.opts.prepare(ctx, "anthropic create message stream", req.validate(), req.Credential)
	if err != nil {
		return AnthropicMessageResult{}, err
	}
	client := anthropic.NewClient(a.opts.AnthropicRequestOptions(key)...)
	var resp *http.Response
	stream := client.Messages.NewStreaming(ctx, req.Params, anthropicoption.WithResponseInto(&resp))
	defer stream.Close()
	var msg anthropic.Message
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			return AnthropicMessageResult{}, providerError(ctx, capacity.Anthropic, malformedAnswer("anthropic create message stream", "events in order: "+err.Error()))
		}
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx)
		}
		if a.opts.Sink == nil || ev.Type != "content_block_delta" || ev.Delta.Type != "text_delta" || ev.Delta.Text == "" {
			continue
		}
		if err := a.opts.Sink(ctx, ev.Delta.Text); err != nil {
			return AnthropicMessageResult{}, fmt.Errorf("anthropic create message stream: the sink refused a delta: %w", err)
		}
	}
	if err := stream.Err(); err != nil {
		return AnthropicMessageResult{}, providerError(ctx, capacity.Anthropic, err)
	}
	if msg.ID == "" {
		return AnthropicMessageResult{}, providerError(ctx, capacity.Anthropic, malformedAnswer("anthropic create message stream", "a message_start event"))
	}
	res := AnthropicMessageResult{Message: msg, Usage: AnthropicUsage(msg.Usage)}
	if resp != nil {
		res.Header = RateLimitHeaders(resp.Header)
	}
	return res, nil
}

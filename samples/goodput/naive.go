package main

import (
	"context"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"

	"github.com/tollgate-dev/tollgate/activities"
)

// sdkRetrying are the naive strategy's activities: the official SDKs with
// their default retries (two, honouring retry-after), returning the SDK's
// error as it is, so Temporal's default retry policy retries it again.
// The activities package turns SDK retries off (one retry layer), hence
// these few lines of their own.
type sdkRetrying struct {
	openAIBaseURL, anthropicBaseURL, key string
}

// Chat is a chat completion through openai-go with its default retries.
func (a *sdkRetrying) Chat(ctx context.Context, req activities.OpenAIChatRequest) (activities.Result, error) {
	c := openai.NewClient(openaioption.WithBaseURL(a.openAIBaseURL), openaioption.WithAPIKey(a.key), openaioption.WithHTTPClient(taggingClient))
	msgs := make([]openai.ChatCompletionMessageParamUnion, 0, len(req.Messages))
	for _, m := range req.Messages {
		msgs = append(msgs, openai.UserMessage(m.Content))
	}
	out, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: req.Model, Messages: msgs, MaxCompletionTokens: openai.Int(req.MaxTokens),
	})
	if err != nil {
		return activities.Result{}, err
	}
	res := activities.Result{Model: out.Model}
	if len(out.Choices) > 0 {
		res.Text = out.Choices[0].Message.Content
	}
	return res, nil
}

// Messages is a Messages request through the Anthropic SDK with its default
// retries.
func (a *sdkRetrying) Messages(ctx context.Context, req activities.AnthropicMessagesRequest) (activities.Result, error) {
	c := anthropic.NewClient(anthropicoption.WithBaseURL(a.anthropicBaseURL), anthropicoption.WithAPIKey(a.key), anthropicoption.WithHTTPClient(taggingClient))
	msgs := make([]anthropic.MessageParam, 0, len(req.Messages))
	for _, m := range req.Messages {
		msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock(m.Content)))
	}
	msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{
		Model: anthropic.Model(req.Model), MaxTokens: req.MaxTokens, Messages: msgs,
	})
	if err != nil {
		return activities.Result{}, err
	}
	return activities.Result{Model: string(msg.Model)}, nil
}

package activities_test

import (
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"google.golang.org/genai"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
)

// weatherTool is a function tool with a JSON-schema parameter.
var weatherTool = shared.FunctionDefinitionParam{
	Name: "get_weather", Description: openai.String("The weather in a city."),
	Parameters: shared.FunctionParameters{"type": "object", "required": []string{"city"},
		"properties": map[string]any{"city": map[string]any{"type": "string"}}},
}

func openAIFullRequest(t testing.TB) activities.OpenAIChatCompletionRequest {
	return activities.OpenAIChatCompletionRequest{Credential: "team-a", Class: capacity.Interactive, Params: openai.ChatCompletionNewParams{
		Model: "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("be brief"),
			openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("what is in this picture, and the weather there?"),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: pngDataURL(t, 64, 64), Detail: "low"}),
			}),
		},
		MaxCompletionTokens: openai.Int(200),
		N:                   openai.Int(2),
		Temperature:         openai.Float(0.2),
		Tools:               []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(weatherTool)},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "answer", Strict: openai.Bool(true),
				Schema: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}},
	}}
}

func anthropicFullRequest(t testing.TB) activities.AnthropicMessageRequest {
	return activities.AnthropicMessageRequest{Credential: "team-a", ExpectedOutputTokens: 100, Params: anthropic.MessageNewParams{
		Model: "claude-sonnet-4-5", MaxTokens: 4000,
		System: []anthropic.TextBlockParam{{Text: "you are terse", CacheControl: anthropic.NewCacheControlEphemeralParam()}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(
			anthropic.NewTextBlock("what is this?"),
			anthropic.NewImageBlockBase64("image/png", pngB64(t, 200, 200)),
		)},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}},
		Thinking: anthropic.ThinkingConfigParamOfEnabled(1024),
	}}
}

func geminiFullRequest(t testing.TB) activities.GeminiContentRequest {
	budget := int32(512)
	return activities.GeminiContentRequest{Model: "gemini-2.5-flash", Credential: "team-a",
		Contents: []*genai.Content{{Role: genai.RoleUser, Parts: []*genai.Part{
			{Text: "what is this?"}, {InlineData: &genai.Blob{MIMEType: "image/png", Data: pngOf(t, 1024, 1024)}},
		}}},
		Config: &genai.GenerateContentConfig{MaxOutputTokens: 1000, SystemInstruction: genai.NewContentFromText("be brief", genai.RoleUser),
			ThinkingConfig:   &genai.ThinkingConfig{ThinkingBudget: &budget},
			ResponseMIMEType: "application/json",
			ResponseSchema:   &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{"city": {Type: genai.TypeString}}},
		},
	}
}

// TestSDKRequestsSurviveThePayloadConverter: each full request, with
// tools, images, schemas, caching and thinking, comes out of Temporal's
// payload converter as it went in, and charges the same.
func TestSDKRequestsSurviveThePayloadConverter(t *testing.T) {
	dc := converter.GetDefaultDataConverter()
	roundTrip := func(in, out any) {
		t.Helper()
		p, err := dc.ToPayload(in)
		require.NoError(t, err)
		require.NoError(t, dc.FromPayload(p, out))
		a, err := json.Marshal(in)
		require.NoError(t, err)
		b, err := json.Marshal(out)
		require.NoError(t, err)
		require.JSONEq(t, string(a), string(b))
	}
	o := openAIFullRequest(t)
	var o2 activities.OpenAIChatCompletionRequest
	roundTrip(o, &o2)
	assert.Equal(t, o.TollgateCall(), o2.TollgateCall())

	a := anthropicFullRequest(t)
	var a2 activities.AnthropicMessageRequest
	roundTrip(a, &a2)
	assert.Equal(t, a.TollgateCall(), a2.TollgateCall())

	g := geminiFullRequest(t)
	var g2 activities.GeminiContentRequest
	roundTrip(g, &g2)
	assert.Equal(t, g.TollgateCall(), g2.TollgateCall())

	r := openAIResponseRequest()
	var r2 activities.OpenAIResponseRequest
	roundTrip(r, &r2)
	assert.Equal(t, r.TollgateCall(), r2.TollgateCall())
	assert.Equal(t, int64(100), r.TollgateCall().Demand.MaxTokens)
}

// TestSDKRequestsCharge: what each full request charges, from its own
// fields: the model, max tokens (times n for OpenAI), the thinking budget
// as output, and an input estimate that counts images by their formula.
func TestSDKRequestsCharge(t *testing.T) {
	o := openAIFullRequest(t).TollgateCall()
	assert.Equal(t, "gpt-4o", o.Model)
	assert.Equal(t, int64(400), o.Demand.MaxTokens, "max_completion_tokens × n")
	assert.Greater(t, o.Demand.InputTokens, int64(85), "at least the low-detail image")
	assert.Less(t, o.Demand.InputTokens, int64(300), "the image by its formula, not its bytes")

	a := anthropicFullRequest(t).TollgateCall()
	assert.Equal(t, int64(100+1024), a.Demand.OutputTokens, "expected output plus the thinking budget")
	assert.Equal(t, int64(4000), a.Demand.MaxTokens)
	assert.True(t, a.Demand.InputEstimated)
	assert.Greater(t, a.Demand.InputTokens, activities.AnthropicImageTokens(200, 200))

	g := geminiFullRequest(t).TollgateCall()
	assert.Equal(t, int64(1000), g.Demand.MaxTokens)
	assert.Greater(t, g.Demand.InputTokens, activities.GeminiImageTokens(1024, 1024))
	assert.Less(t, g.Demand.InputTokens, activities.GeminiImageTokens(1024, 1024)+200)
}

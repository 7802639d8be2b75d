package activities_test

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"

	"github.com/tollgate-dev/tollgate/activities"
)

// TestImageTokens checks each provider's formula against the examples its
// documentation gives.
func TestImageTokens(t *testing.T) {
	tests := []struct {
		name string
		got  int64
		want int64
	}{
		{"openai 1024x1024 high: 4 tiles", activities.OpenAIImageTokens("gpt-4o", 1024, 1024, "high"), 765},
		{"openai 2048x4096 high: 6 tiles", activities.OpenAIImageTokens("gpt-4o", 2048, 4096, "high"), 1105},
		{"openai 4096x8192 auto: as high", activities.OpenAIImageTokens("gpt-4.1", 4096, 8192, "auto"), 1105},
		{"openai low detail", activities.OpenAIImageTokens("gpt-4o", 4096, 8192, "low"), 85},
		{"openai small image: one tile", activities.OpenAIImageTokens("gpt-4o", 300, 200, ""), 255},
		{"openai unknown size: the most", activities.OpenAIImageTokens("gpt-4o", 0, 0, "high"), 85 + 170*8},
		{"gpt-4o-mini multipliers", activities.OpenAIImageTokens("gpt-4o-mini", 1024, 1024, "high"), 2833 + 5667*4},
		{"anthropic 200x200", activities.AnthropicImageTokens(200, 200), 54},
		{"anthropic 1000x1000", activities.AnthropicImageTokens(1000, 1000), 1334},
		{"anthropic 1092x1092: the largest square kept", activities.AnthropicImageTokens(1092, 1092), 1590},
		{"anthropic 4000x4000: scaled down", activities.AnthropicImageTokens(4000, 4000), 1600},
		{"gemini 384x384: one", activities.GeminiImageTokens(384, 384), 258},
		{"gemini 1024x1024: four tiles", activities.GeminiImageTokens(1024, 1024), 1032},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.got, tt.name)
	}
}

// pngOf is a w×h PNG.
func pngOf(t testing.TB, w, h int) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func pngDataURL(t testing.TB, w, h int) string {
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngOf(t, w, h))
}

func TestImageSize(t *testing.T) {
	w, h, ok := activities.ImageSize(pngOf(t, 640, 480))
	assert.True(t, ok)
	assert.Equal(t, [2]int{640, 480}, [2]int{w, h})
	_, _, ok = activities.ImageSize([]byte("not an image"))
	assert.False(t, ok)
}

// TestEstimatesCountImagesByTheFormula: an image in a request is charged
// by its provider's formula from its size, not by its bytes.
func TestEstimatesCountImagesByTheFormula(t *testing.T) {
	url := pngDataURL(t, 1024, 1024)
	assert.Greater(t, len(url), 1000, "the image's bytes would count far more")
	withImage := activities.EstimateOpenAIChat(openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("describe"),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url, Detail: "high"}),
		}),
	}})
	textOnly := activities.EstimateOpenAIChat(openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{openai.TextContentPart("describe")}),
	}})
	assert.Equal(t, int64(765), withImage-textOnly, "1024x1024 at high detail")
}

func pngB64(t testing.TB, w, h int) string {
	return base64.StdEncoding.EncodeToString(pngOf(t, w, h))
}

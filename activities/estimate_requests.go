package activities

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"
)

// Estimates of whole provider requests, as the ready activities take them
// and as activities of your own build them: text by each provider's
// counting (OpenAI's tokenizer; 3 bytes a token for Anthropic and Gemini,
// erring high), images by the providers' formulas (OpenAIImageTokens,
// AnthropicImageTokens, GeminiImageTokens), PDF documents at
// documentPageTokens a page, and tool definitions, tool calls and
// structured-output schemas as the JSON the provider reads. Anything else
// (audio, other files) counts as its JSON text, erring high. Each walks the
// request as the SDK sends it (its JSON), so every field the API has is
// seen.

// documentPageTokens is what one PDF page is charged: Anthropic documents
// 1,500 to 3,000 tokens a page (its text and an image of it); the estimate
// takes the top.
const documentPageTokens = 3000

// textCounter counts the tokens of a text.
type textCounter func(s string) int64

func openAICounter(model string) textCounter {
	c, ok := codecFor(openAIEncoding(model))
	return func(s string) int64 {
		if ok {
			if n, err := c.Count(s); err == nil {
				return int64(n)
			}
		}
		return estimateBytes(s)
	}
}

// EstimateOpenAIChat estimates the input tokens of a Chat Completions
// request: its messages (text, images at their detail, tool calls), tool
// definitions and response_format schema, with OpenAI's tokenizer.
func EstimateOpenAIChat(p openai.ChatCompletionNewParams) int64 {
	body, err := json.Marshal(p)
	if err != nil {
		return 0
	}
	return estimateOpenAIChatBody(p.Model, body)
}

func estimateOpenAIChatBody(model string, body []byte) int64 {
	var req struct {
		Messages []struct {
			Content   json.RawMessage `json:"content"`
			ToolCalls json.RawMessage `json:"tool_calls"`
		} `json:"messages"`
		Tools          json.RawMessage `json:"tools"`
		ResponseFormat json.RawMessage `json:"response_format"`
	}
	if json.Unmarshal(body, &req) != nil {
		return estimateBytes(string(body))
	}
	count := openAICounter(model)
	n := int64(perRequestTokens) + rawTokens(count, req.Tools) + rawTokens(count, req.ResponseFormat)
	for _, m := range req.Messages {
		n += perMessageTokens + rawTokens(count, m.ToolCalls)
		n += contentTokens(m.Content, count, func(part map[string]json.RawMessage) (int64, bool) {
			var img struct {
				URL    string `json:"url"`
				Detail string `json:"detail"`
			}
			if json.Unmarshal(part["image_url"], &img) != nil {
				return 0, false
			}
			w, h, _ := dataURLImageSize(img.URL)
			return OpenAIImageTokens(model, w, h, img.Detail), true
		})
	}
	return n
}

// EstimateAnthropicMessages estimates the input tokens of a Messages
// request: system, messages (text, images, PDF documents, tool use and
// results) and tool definitions, at 3 bytes a token. Prompt caching does not
// change the estimate: what is read from the cache is settled when the call
// reports it.
func EstimateAnthropicMessages(p anthropic.MessageNewParams) int64 {
	body, err := json.Marshal(p)
	if err != nil {
		return 0
	}
	var req struct {
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(body, &req) != nil {
		return estimateBytes(string(body))
	}
	count := textCounter(estimateBytes)
	n := int64(perRequestTokens) + rawTokens(count, req.Tools)
	if len(req.System) > 0 {
		n += perMessageTokens + contentTokens(req.System, count, anthropicMedia)
	}
	for _, m := range req.Messages {
		n += perMessageTokens + contentTokens(m.Content, count, anthropicMedia)
	}
	return n
}

// anthropicMedia counts an image or document block.
func anthropicMedia(part map[string]json.RawMessage) (int64, bool) {
	var src struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	}
	if json.Unmarshal(part["source"], &src) != nil {
		return 0, false
	}
	var typ string
	_ = json.Unmarshal(part["type"], &typ)
	switch {
	case typ == "image" && src.Type == "base64":
		w, h, _ := base64ImageSize(src.Data)
		return AnthropicImageTokens(w, h), true
	case typ == "image":
		return AnthropicImageTokens(0, 0), true
	case typ == "document" && src.Type == "base64" && src.MediaType == "application/pdf":
		return pdfTokens(src.Data), true
	}
	return 0, false
}

// EstimateGeminiContent estimates the input tokens of a generateContent
// request: contents (text, inline images, PDF documents, function calls and
// responses), the system instruction, tools and the response schema, at 3
// bytes a token.
func EstimateGeminiContent(contents []*genai.Content, config *genai.GenerateContentConfig) int64 {
	count := textCounter(estimateBytes)
	n := int64(perRequestTokens)
	for _, c := range contents {
		if c != nil {
			n += perMessageTokens + geminiContentTokens(c, count)
		}
	}
	if config == nil {
		return n
	}
	if config.SystemInstruction != nil {
		n += perMessageTokens + geminiContentTokens(config.SystemInstruction, count)
	}
	for _, v := range []any{config.Tools, config.ResponseSchema, config.ResponseJsonSchema} {
		if b, err := json.Marshal(v); err == nil && string(b) != "null" {
			n += count(string(b))
		}
	}
	return n
}

func geminiContentTokens(c *genai.Content, count textCounter) int64 {
	var n int64
	for _, p := range c.Parts {
		switch {
		case p == nil:
		case p.Text != "":
			n += count(p.Text)
		case p.InlineData != nil && strings.HasPrefix(p.InlineData.MIMEType, "image/"):
			w, h, _ := ImageSize(p.InlineData.Data)
			n += GeminiImageTokens(w, h)
		case p.InlineData != nil && p.InlineData.MIMEType == "application/pdf":
			n += int64(max(pdfPages(p.InlineData.Data), 1)) * documentPageTokens
		case p.FileData != nil && strings.HasPrefix(p.FileData.MIMEType, "image/"):
			n += GeminiImageTokens(0, 0)
		default:
			b, _ := json.Marshal(p)
			n += count(string(b))
		}
	}
	return n
}

// contentTokens counts a message content: a string, or an array of parts
// or blocks: text as count says, what media recognizes (images, documents)
// as it says, anything else as its JSON.
func contentTokens(raw json.RawMessage, count textCounter, media func(map[string]json.RawMessage) (int64, bool)) int64 {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return count(s)
	}
	var parts []map[string]json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return rawTokens(count, raw)
	}
	var n int64
	for _, part := range parts {
		var typ, text string
		_ = json.Unmarshal(part["type"], &typ)
		if typ == "text" && json.Unmarshal(part["text"], &text) == nil {
			n += count(text)
			continue
		}
		if k, ok := media(part); ok {
			n += k
			continue
		}
		if typ == "tool_result" {
			n += contentTokens(part["content"], count, media)
			continue
		}
		b, _ := json.Marshal(part)
		n += count(string(b))
	}
	return n
}

// rawTokens counts a JSON value's text; null and absent count nothing.
func rawTokens(count textCounter, raw json.RawMessage) int64 {
	if len(raw) == 0 || string(raw) == "null" {
		return 0
	}
	return count(string(raw))
}

// pdfTokens is the estimate of a base64 PDF document: documentPageTokens a
// page, at least one page.
func pdfTokens(data string) int64 {
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return estimateBytes(data)
	}
	return int64(max(pdfPages(raw), 1)) * documentPageTokens
}

// pdfPages counts a PDF's page objects ("/Type /Page", not "/Pages").
func pdfPages(pdf []byte) int {
	n := 0
	for _, marker := range [][]byte{[]byte("/Type /Page"), []byte("/Type/Page")} {
		for rest := pdf; ; {
			i := bytes.Index(rest, marker)
			if i < 0 {
				break
			}
			rest = rest[i+len(marker):]
			if len(rest) == 0 || rest[0] != 's' {
				n++
			}
		}
	}
	return n
}

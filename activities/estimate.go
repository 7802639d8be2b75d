package activities

import (
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// Per-message overheads of the chat formats: OpenAI's cookbook counts 3
// tokens per message and 3 to prime the reply; Anthropic's are of the same
// order. They make estimates pessimistic, never lower.
const (
	perMessageTokens = 4
	perRequestTokens = 3
)

var (
	codecsMu sync.Mutex
	codecs   = map[tokenizer.Encoding]tokenizer.Codec{}
)

// openAIEncoding is the tokenizer encoding of an OpenAI model: o200k_base for
// the gpt-4o, gpt-4.1, gpt-5 and o-series families, cl100k_base for gpt-4,
// gpt-3.5 and the text-embedding models.
func openAIEncoding(model string) tokenizer.Encoding {
	switch {
	case strings.HasPrefix(model, "gpt-4-"), model == "gpt-4", strings.HasPrefix(model, "gpt-3.5"), strings.HasPrefix(model, "gpt-35"),
		strings.HasPrefix(model, "text-embedding-"):
		return tokenizer.Cl100kBase
	}
	return tokenizer.O200kBase
}

func codecFor(enc tokenizer.Encoding) (tokenizer.Codec, bool) {
	codecsMu.Lock()
	defer codecsMu.Unlock()
	if c, ok := codecs[enc]; ok {
		return c, true
	}
	c, err := tokenizer.Get(enc)
	if err != nil {
		return nil, false
	}
	codecs[enc] = c
	return c, true
}

// EstimateOpenAITokens counts the input tokens of messages for model with
// OpenAI's own tokenizer (tiktoken, offline), plus the chat format's
// per-message overhead.
func EstimateOpenAITokens(model string, messages []Message) int64 {
	c, ok := codecFor(openAIEncoding(model))
	n := int64(perRequestTokens)
	for _, m := range messages {
		n += perMessageTokens
		if !ok {
			n += estimateBytes(m.Content)
			continue
		}
		k, err := c.Count(m.Content)
		if err != nil {
			n += estimateBytes(m.Content)
			continue
		}
		n += int64(k)
	}
	return n
}

// EstimateOpenAIEmbeddingTokens counts the input tokens of an embeddings
// request with OpenAI's own tokenizer: each input's tokens, with no
// per-message overhead (embeddings have none).
func EstimateOpenAIEmbeddingTokens(model string, inputs []string) int64 {
	c, ok := codecFor(openAIEncoding(model))
	var n int64
	for _, s := range inputs {
		k, err := 0, error(nil)
		if ok {
			k, err = c.Count(s)
		}
		if !ok || err != nil {
			n += estimateBytes(s)
			continue
		}
		n += int64(k)
	}
	return n
}

// EstimateGeminiEmbeddingTokens estimates the input tokens of an embeddings
// request as EstimateGeminiTokens does: ceil(bytes / 3) per input.
func EstimateGeminiEmbeddingTokens(inputs []string) int64 {
	var n int64
	for _, s := range inputs {
		n += estimateBytes(s)
	}
	return n
}

// anthropicBytesPerToken is the calibration of EstimateAnthropicTokens.
// Anthropic publishes no offline tokenizer; its models average about 3.5
// bytes of English per token, and fewer for code and non-Latin text. The
// estimate uses 3 bytes per token so that it errs high: the reservation is
// settled to the reported usage after the call, so a high estimate costs a
// little waiting, a low one costs debt.
const anthropicBytesPerToken = 3.0

// EstimateAnthropicTokens estimates the input tokens of a Messages request:
// ceil(bytes / 3) per text plus the per-message overhead.
func EstimateAnthropicTokens(system string, messages []Message) int64 {
	n := int64(perRequestTokens)
	if system != "" {
		n += perMessageTokens + estimateBytes(system)
	}
	for _, m := range messages {
		n += perMessageTokens + estimateBytes(m.Content)
	}
	return n
}

func estimateBytes(s string) int64 {
	return int64((float64(len(s)) + anthropicBytesPerToken - 1) / anthropicBytesPerToken)
}

// EstimateGeminiTokens estimates the input tokens of a generateContent
// request as EstimateAnthropicTokens does: Google's tokenizer is not offline
// either (countTokens is a request), and Gemini averages about 4 bytes of
// English per token, so 3 bytes a token errs high; the reservation is
// settled to the reported promptTokenCount.
func EstimateGeminiTokens(system string, messages []Message) int64 {
	return EstimateAnthropicTokens(system, messages)
}

package testsuite

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
)

// Embedding models: the fake serves a Model with Embeddings set at the
// embeddings endpoints only (OpenAI POST /v1/embeddings; Gemini
// :embedContent and :batchEmbedContents) and refuses it at the chat ones,
// as the providers do. An embedding is charged its input only: no output,
// no max_tokens.
const (
	// DefaultOpenAIEmbeddingModel is an OpenAI embedding model name.
	DefaultOpenAIEmbeddingModel = "text-embedding-3-small"
	// DefaultGeminiEmbeddingModel is a Gemini embedding model name.
	DefaultGeminiEmbeddingModel = "gemini-embedding-001"

	// maxEmbeddingInputs is the most inputs one OpenAI embeddings request
	// takes.
	maxEmbeddingInputs = 2048
)

// vector is a deterministic unit-free embedding of dims values for input
// index i of answer seq.
func vector(seq uint64, i, dims int) []float64 {
	v := make([]float64, dims)
	for j := range v {
		v[j] = math.Sin(float64(seq)*0.7 + float64(i)*1.3 + float64(j)*0.11)
	}
	return v
}

// openaiEmbeddingsDialect is OpenAI's POST /v1/embeddings: the chat
// dialect's keys, errors and headers, its own request and answer.
type openaiEmbeddingsDialect struct{ openaiDialect }

type openaiEmbeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	Dimensions     *int            `json:"dimensions"`
	EncodingFormat string          `json:"encoding_format"`
}

// parse decodes an embeddings request: input is a string, an array of
// strings, an array of token ids or an array of such arrays; each string
// counts CountTokens, each token array its length.
func (openaiEmbeddingsDialect) parse(body []byte) (parsed, *failure) {
	var req openaiEmbeddingsRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return parsed{}, openaiInvalid(openaiBadJSON, "", "")
	}
	out := parsed{model: req.Model, embedding: &embeddingRequest{base64: req.EncodingFormat == "base64"}}
	if req.Model == "" {
		return out, openaiInvalid("you must provide a model parameter", "", "")
	}
	switch req.EncodingFormat {
	case "", "float", "base64":
	default:
		return out, openaiInvalid(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'float' and 'base64'.", req.EncodingFormat),
			"encoding_format", "invalid_value")
	}
	counts, ok := embeddingInputTokens(req.Input)
	if !ok || len(counts) == 0 {
		return out, openaiInvalid("'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.",
			"input", "invalid_value")
	}
	if len(counts) > maxEmbeddingInputs {
		return out, openaiInvalid(fmt.Sprintf("'$.input' is too long: %d inputs; at most %d.", len(counts), maxEmbeddingInputs),
			"input", "invalid_value")
	}
	if req.Dimensions != nil {
		if *req.Dimensions < 1 {
			return out, openaiInvalid("Invalid value for 'dimensions' = 0. Must be greater than 0.", "dimensions", "invalid_value")
		}
		out.embedding.dims = *req.Dimensions
	}
	out.embedding.inputs = counts
	for _, n := range counts {
		out.input += n
	}
	return out, nil
}

// embeddingInputTokens counts each input of an OpenAI embeddings request.
func embeddingInputTokens(raw json.RawMessage) ([]int64, bool) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []int64{CountTokens(one)}, one != ""
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil {
		counts := make([]int64, len(texts))
		for i, s := range texts {
			if s == "" {
				return nil, false
			}
			counts[i] = CountTokens(s)
		}
		return counts, true
	}
	var tokens []int64
	if json.Unmarshal(raw, &tokens) == nil {
		return []int64{int64(len(tokens))}, len(tokens) > 0
	}
	var arrays [][]int64
	if json.Unmarshal(raw, &arrays) == nil {
		counts := make([]int64, len(arrays))
		for i, a := range arrays {
			if len(a) == 0 {
				return nil, false
			}
			counts[i] = int64(len(a))
		}
		return counts, true
	}
	return nil, false
}

// prepare checks each input against the model's context window (the most
// tokens of one input) and the dimensions against the model's.
func (openaiEmbeddingsDialect) prepare(m *Model, req *parsed) (demand, *failure) {
	d := demand{provider: OpenAI, input: req.input}
	e := req.embedding
	for _, n := range e.inputs {
		if n > m.ContextWindow {
			f := openaiInvalid(fmt.Sprintf("This model's maximum context length is %d tokens, however you requested %d tokens in the input. Please reduce your input.",
				m.ContextWindow, n), "input", "context_length_exceeded")
			f.cause = CauseContextLength
			return d, f
		}
	}
	if e.dims > m.Dimensions {
		return d, openaiInvalid(fmt.Sprintf("This model does not support specifying dimensions larger than %d.", m.Dimensions), "dimensions", "invalid_value")
	}
	if e.dims == 0 {
		e.dims = m.Dimensions
	}
	return d, nil
}

type openaiEmbeddingList struct {
	Object string            `json:"object"`
	Data   []openaiEmbedding `json:"data"`
	Model  string            `json:"model"`
	Usage  struct {
		PromptTokens int64 `json:"prompt_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
}

type openaiEmbedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float64, or base64 of little-endian float32s
}

// writeAnswer writes the list of embeddings, one per input, with usage.
func (openaiEmbeddingsDialect) writeAnswer(w http.ResponseWriter, seq uint64, a *answerInfo) {
	list := openaiEmbeddingList{Object: "list", Model: a.model}
	for i := range a.embedding.inputs {
		var v any = vector(seq, i, a.embedding.dims)
		if a.embedding.base64 {
			v = base64Floats(v.([]float64))
		}
		list.Data = append(list.Data, openaiEmbedding{Object: "embedding", Index: i, Embedding: v})
	}
	list.Usage.PromptTokens, list.Usage.TotalTokens = a.usage.InputTokens, a.usage.InputTokens
	w.Header()["X-Request-Id"] = []string{openaiRequestID(seq)}
	writeJSON(w, http.StatusOK, marshal(list))
}

// base64Floats is OpenAI's base64 encoding of an embedding: little-endian
// float32s.
func base64Floats(v []float64) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(f)))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// geminiEmbedDialect is Gemini's :embedContent (one content) and
// :batchEmbedContents (several): the generateContent dialect's keys,
// errors and limits, its own request and answer.
type geminiEmbedDialect struct {
	geminiDialect
	batch bool
}

const (
	geminiEmbedMethod      = ":embedContent"
	geminiBatchEmbedMethod = ":batchEmbedContents"
)

// geminiEmbedPath reports whether path is a Gemini embedding method, and
// which.
func geminiEmbedPath(path string) (model string, batch, ok bool) {
	if !strings.HasPrefix(path, "/v1beta/models/") && !strings.HasPrefix(path, "/v1/models/") {
		return "", false, false
	}
	rest := path[strings.Index(path, "/models/")+len("/models/"):]
	if m, found := strings.CutSuffix(rest, geminiBatchEmbedMethod); found {
		return m, true, true
	}
	if m, found := strings.CutSuffix(rest, geminiEmbedMethod); found {
		return m, false, true
	}
	return "", false, false
}

type geminiEmbedRequest struct {
	Content              *geminiContent `json:"content"`
	OutputDimensionality *int           `json:"outputDimensionality"`
}

type geminiBatchEmbedRequest struct {
	Requests []geminiEmbedRequest `json:"requests"`
}

// parse decodes one embed request or a batch; each content counts as
// generateContent counts it.
func (g geminiEmbedDialect) parse(body []byte) (parsed, *failure) {
	out := parsed{model: g.model, embedding: &embeddingRequest{}}
	var reqs []geminiEmbedRequest
	if g.batch {
		var b geminiBatchEmbedRequest
		if err := json.Unmarshal(body, &b); err != nil {
			return out, geminiInvalid("Invalid JSON payload received. Unexpected token.")
		}
		if len(b.Requests) == 0 {
			return out, geminiInvalid("* BatchEmbedContentsRequest.requests: requests is not specified\n")
		}
		reqs = b.Requests
	} else {
		var r geminiEmbedRequest
		if err := json.Unmarshal(body, &r); err != nil {
			return out, geminiInvalid("Invalid JSON payload received. Unexpected token.")
		}
		reqs = []geminiEmbedRequest{r}
	}
	for i, r := range reqs {
		if r.Content == nil || len(r.Content.Parts) == 0 {
			return out, geminiInvalid(fmt.Sprintf("* EmbedContentRequest.content: contents is not specified (request %d)\n", i))
		}
		n, ok := geminiContentTokens(r.Content)
		if !ok {
			return out, geminiInvalid(fmt.Sprintf("Invalid JSON payload received. Unknown name \"parts\" at 'requests[%d].content'.", i))
		}
		n -= MessageOverhead // an embedding's content is not a turn
		if d := r.OutputDimensionality; d != nil {
			if *d < 1 {
				return out, geminiInvalid("* EmbedContentRequest.output_dimensionality: must be positive.\n")
			}
			out.embedding.dims = *d
		}
		out.embedding.inputs = append(out.embedding.inputs, n)
		out.input += n
	}
	out.embedding.single = !g.batch
	return out, nil
}

// prepare checks each content against the model's input limit.
func (geminiEmbedDialect) prepare(m *Model, req *parsed) (demand, *failure) {
	d := demand{provider: Gemini, input: req.input}
	e := req.embedding
	for _, n := range e.inputs {
		if n > m.ContextWindow {
			f := geminiInvalid(fmt.Sprintf("The input token count (%d) exceeds the maximum number of tokens allowed (%d).", n, m.ContextWindow))
			f.cause = CauseContextLength
			return d, f
		}
	}
	if e.dims == 0 || e.dims > m.Dimensions {
		e.dims = m.Dimensions
	}
	return d, nil
}

type geminiValues struct {
	Values []float64 `json:"values"`
}

// writeAnswer writes {"embedding":{"values":[...]}} for one content, or
// {"embeddings":[...]} for a batch. Gemini reports no usage for embeddings.
func (geminiEmbedDialect) writeAnswer(w http.ResponseWriter, seq uint64, a *answerInfo) {
	values := make([]geminiValues, len(a.embedding.inputs))
	for i := range values {
		values[i] = geminiValues{Values: vector(seq, i, a.embedding.dims)}
	}
	var body []byte
	if a.embedding.single {
		body = marshal(struct {
			Embedding geminiValues `json:"embedding"`
		}{values[0]})
	} else {
		body = marshal(struct {
			Embeddings []geminiValues `json:"embeddings"`
		}{values})
	}
	writeJSON(w, http.StatusOK, body)
}

// embeddingRequest is what an embeddings request asked for.
type embeddingRequest struct {
	inputs []int64 // tokens of each input
	dims   int     // dimensions asked for; the model's after prepare
	base64 bool    // OpenAI encoding_format "base64"
	single bool    // Gemini :embedContent, one content
}

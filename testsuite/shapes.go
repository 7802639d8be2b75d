package testsuite

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	_ "image/gif" // image sizes of the formats requests send
	_ "image/jpeg"
	_ "image/png"
	"math"
	"strings"
)

// What the fake answers beside text, as the providers do: a request that
// offers tools and does not carry a tool's result answers with a call of
// its first tool (or of the one tool_choice names), with arguments built
// from the tool's parameter schema; a request for structured output (an
// OpenAI response_format json_schema or json_object, a Gemini
// responseSchema) answers with a JSON object built from the schema. The
// usage stays what OutputFunc decided. Images count by each provider's
// published formula from their size, not by their bytes.

// answerShape is what an answer carries instead of plain text.
type answerShape struct {
	// tool names the tool to call ("" for none); args is its arguments.
	tool, args string
	// json is the structured output ("" for none).
	json string
}

// exampleOf builds a JSON value that fits schema: every property of an
// object, "tok" for a string, 1 for a number, true for a boolean, one item
// for an array, an enum's first value.
func exampleOf(schema any, depth int) any {
	s, ok := schema.(map[string]any)
	if !ok || depth > 8 {
		return map[string]any{}
	}
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	typ, _ := s["type"].(string)
	if types, ok := s["type"].([]any); ok && len(types) > 0 {
		typ, _ = types[0].(string)
	}
	switch strings.ToLower(typ) {
	case "string":
		return "tok"
	case "number", "integer":
		return 1
	case "boolean":
		return true
	case "array":
		return []any{exampleOf(s["items"], depth+1)}
	}
	out := map[string]any{}
	props, _ := s["properties"].(map[string]any)
	for name, p := range props {
		out[name] = exampleOf(p, depth+1)
	}
	return out
}

// exampleJSON is exampleOf(schema) as JSON text.
func exampleJSON(schema json.RawMessage) string {
	var s any
	_ = json.Unmarshal(schema, &s)
	return string(marshal(exampleOf(s, 0)))
}

// imageSize reads the size of a PNG, JPEG or GIF from its base64 data.
func imageSize(b64 string) (w, h int, ok bool) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return 0, 0, false
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(raw))
	if err != nil {
		return 0, 0, false
	}
	return cfg.Width, cfg.Height, true
}

// openaiImageTokens is OpenAI's tile formula: 85 at low detail; else the
// image scaled into 2048 × 2048, then its short side to at most 768, 85 +
// 170 per 512-pixel tile. An image of unknown size costs 8 tiles.
func openaiImageTokens(w, h int, detail string) int64 {
	if detail == "low" {
		return 85
	}
	if w <= 0 || h <= 0 {
		return 85 + 170*8
	}
	fw, fh := float64(w), float64(h)
	if s := 2048 / math.Max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	if short := math.Min(fw, fh); short > 768 {
		fw, fh = fw*768/short, fh*768/short
	}
	return 85 + 170*int64(math.Ceil(fw/512)*math.Ceil(fh/512))
}

// anthropicImageTokens is Anthropic's formula: w × h ÷ 750 after scaling
// the long edge to at most 1568 and the whole to at most 1,600 tokens.
func anthropicImageTokens(w, h int) int64 {
	if w <= 0 || h <= 0 {
		return 1600
	}
	fw, fh := float64(w), float64(h)
	if s := 1568 / math.Max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	return min(int64(math.Ceil(fw*fh/750-1e-9)), 1600)
}

// geminiImageTokens is Gemini's: 258 for an image within 384 × 384, else
// 258 per 768 × 768 tile.
func geminiImageTokens(w, h int) int64 {
	if w <= 0 || h <= 0 {
		return 4 * 258
	}
	if w <= 384 && h <= 384 {
		return 258
	}
	return 258 * int64(math.Ceil(float64(w)/768)*math.Ceil(float64(h)/768))
}

// dataURLSize reads the size of a base64 data URL's image.
func dataURLSize(url string) (w, h int, ok bool) {
	rest, found := strings.CutPrefix(url, "data:")
	if !found {
		return 0, 0, false
	}
	meta, data, found := strings.Cut(rest, ",")
	if !found || !strings.HasSuffix(meta, ";base64") {
		return 0, 0, false
	}
	return imageSize(data)
}

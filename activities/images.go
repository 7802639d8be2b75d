package activities

import (
	"bytes"
	"encoding/base64"
	"image"
	_ "image/gif" // image.DecodeConfig reads GIF sizes
	_ "image/jpeg"
	_ "image/png"
	"math"
	"strings"
)

// Image input is charged by each provider's published formula from the
// image's width and height in pixels, after the provider scales it down.
// An image whose size cannot be read (a URL, or a format other than PNG,
// JPEG and GIF) is charged the most that provider's formula gives an image
// at its default detail: the estimate errs high, and the call settles to
// the usage the provider reports.
const (
	// openAIUnknownImageTiles is the tiles of a 768 × 2048 image at high
	// detail, the most the tile formula charges.
	openAIUnknownImageTiles = 8
	// anthropicUnknownImageTokens is the most an image costs after
	// Anthropic's scaling (1.2 megapixels ÷ 750).
	anthropicUnknownImageTokens = 1600
	// geminiUnknownImageTokens is four 768 × 768 tiles.
	geminiUnknownImageTokens = 4 * 258
)

// OpenAIImageTokens is the input tokens OpenAI charges an image of width ×
// height pixels at detail ("low", "high" or "auto", read as "high"), by the
// tile formula of the GPT-4o, GPT-4.1 and o-series models: low detail 85;
// else the image is scaled to fit 2048 × 2048, then so that its shortest
// side is at most 768, and costs 85 + 170 per 512-pixel tile. gpt-4o-mini
// charges 2,833 + 5,667 per tile. A size not positive is an image of
// unknown size.
func OpenAIImageTokens(model string, width, height int, detail string) int64 {
	base, perTile := int64(85), int64(170)
	if strings.HasPrefix(model, "gpt-4o-mini") {
		base, perTile = 2833, 5667
	}
	if detail == "low" {
		return base
	}
	if width <= 0 || height <= 0 {
		return base + perTile*openAIUnknownImageTiles
	}
	w, h := fit(float64(width), float64(height), 2048, 2048)
	if short := math.Min(w, h); short > 768 {
		w, h = w*768/short, h*768/short
	}
	tiles := int64(math.Ceil(w/512) * math.Ceil(h/512))
	return base + perTile*tiles
}

// AnthropicImageTokens is the input tokens Anthropic charges an image of
// width × height pixels: width × height ÷ 750, after scaling the image so
// that its long edge is at most 1,568 pixels and it costs at most about
// 1,600 tokens (1.2 megapixels). A size not positive is an image of unknown
// size.
func AnthropicImageTokens(width, height int) int64 {
	if width <= 0 || height <= 0 {
		return anthropicUnknownImageTokens
	}
	w, h := fit(float64(width), float64(height), 1568, 1568)
	if area, most := w*h, float64(anthropicUnknownImageTokens*750); area > most {
		f := math.Sqrt(most / area)
		w, h = w*f, h*f
	}
	return int64(math.Ceil(w*h/750 - 1e-9)) // not a token more for rounding
}

// GeminiImageTokens is the input tokens Gemini charges an image of width ×
// height pixels: 258 if both sides are at most 384, else 258 per 768 × 768
// tile. A size not positive is an image of unknown size.
func GeminiImageTokens(width, height int) int64 {
	if width <= 0 || height <= 0 {
		return geminiUnknownImageTokens
	}
	if width <= 384 && height <= 384 {
		return 258
	}
	return 258 * int64(math.Ceil(float64(width)/768)*math.Ceil(float64(height)/768))
}

// fit scales w × h down, keeping its aspect, to fit maxW × maxH.
func fit(w, h, maxW, maxH float64) (float64, float64) {
	if f := math.Min(maxW/w, maxH/h); f < 1 {
		return w * f, h * f
	}
	return w, h
}

// ImageSize reads the width and height of a PNG, JPEG or GIF image from
// its bytes; ok is false for anything else.
func ImageSize(data []byte) (width, height int, ok bool) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0, false
	}
	return cfg.Width, cfg.Height, true
}

// base64ImageSize is ImageSize of base64 data (standard or URL encoding);
// only the header is decoded.
func base64ImageSize(data string) (width, height int, ok bool) {
	const head = 64 << 10 // every format's size is near its start
	if len(data) > head {
		data = data[:head-head%4]
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(data, "=")); err != nil {
			return 0, 0, false
		}
	}
	return ImageSize(raw)
}

// dataURLImageSize reads the size of an image given as a data URL
// ("data:image/png;base64,..."); ok is false for any other URL.
func dataURLImageSize(url string) (width, height int, ok bool) {
	rest, found := strings.CutPrefix(url, "data:")
	if !found {
		return 0, 0, false
	}
	meta, data, found := strings.Cut(rest, ",")
	if !found || !strings.HasSuffix(meta, ";base64") {
		return 0, 0, false
	}
	return base64ImageSize(data)
}

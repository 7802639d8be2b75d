// Package activities holds ready model-call activities on the official
// provider SDKs — OpenAI chat completions and embeddings
// (github.com/openai/openai-go/v3), Anthropic messages
// (github.com/anthropics/anthropic-sdk-go) and Gemini generateContent and
// embeddings (google.golang.org/genai) — built on
// the interceptor's contract: their inputs implement interceptor.ModelCall,
// their Result implements interceptor.ModelResult.
//
// SDK retries are off (MaxRetries 0): Temporal's retry policy, shaped by the
// gate, is the only retry loop. API keys are resolved on the worker from a
// credential scope name (Credentials), so they never appear in activity
// input or workflow history; a request may name a key pool
// (interceptor.Options.Pools) as its Credential, and each attempt uses the
// key of the member the gate chose (interceptor.Credential). Input tokens are counted with OpenAI's
// tokenizer (tiktoken, offline) for OpenAI models and estimated for
// Anthropic and Gemini (3 bytes a token, erring high; settled to actual
// usage after the call). Results carry the text, the usage and only the rate-limit
// headers.
//
// Embeddings are charged as the providers charge them: one request and the
// input's tokens, no output (EmbedRequest).
//
// Importing this package registers the readers of the three SDKs' errors
// (errors/openaierr, errors/anthropicerr, errors/geminierr), so the gate
// classifies them.
//
//	oa, _ := activities.NewOpenAI(activities.OpenAIOptions{Credentials: activities.EnvCredentials{Prefix: "OPENAI_API_KEY_"}})
//	an, _ := activities.NewAnthropic(activities.AnthropicOptions{Credentials: activities.EnvCredentials{Prefix: "ANTHROPIC_API_KEY_"}})
//	gm, _ := activities.NewGemini(activities.GeminiOptions{Credentials: activities.EnvCredentials{Prefix: "GEMINI_API_KEY_"}})
//	w.RegisterActivity(oa) // activities "Chat" and "Embeddings"
//	w.RegisterActivity(an) // activity "Messages"
//	w.RegisterActivity(gm) // activities "GenerateContent" and "EmbedContent"
package activities

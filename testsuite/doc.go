// Package testsuite helps tollgate's users, and tollgate itself, test code
// that calls LLM providers under rate limits.
//
// Its centrepiece is FakeProvider: an HTTP server on 127.0.0.1 speaking the
// OpenAI chat completions (POST /v1/chat/completions), Responses (POST
// /v1/responses) and embeddings (POST /v1/embeddings), Anthropic messages (POST /v1/messages) and Gemini
// generateContent, embedContent and batchEmbedContents wire formats, so the
// official Go SDKs talk to it unchanged through their base-URL option. An
// embedding model (Model.Embeddings) is served at the embeddings endpoints
// only and charged its input only. Answers take the shape a request asks
// for, as the providers' do: a request offering tools (and not carrying a
// tool's result) is answered with a call of its first tool (or the one
// tool_choice names), arguments built from the tool's schema; a request
// for structured output with a JSON object built from its schema. Images
// count by each provider's published formula from their size. OpenAI chat
// completions and Anthropic messages stream as server-sent events when
// asked, with the usage in the last event. It meters every dimension the way
// the real services do — continuously refilling request and token buckets
// per scope (model + API key), OpenAI's and Anthropic's token accounting,
// daily quotas, a concurrency cap, per-minute or per-second enforcement — and
// answers with the real rate-limit headers and error bodies, computed as it
// answers or, with Options.HeadersAt, as it admits the request (providers
// differ; a client should hold under both). Limits can change mid-run,
// faults can be injected, and a second client can spend the same budget.
// Everything it charged and answered is recorded (with the label a test
// puts in a request's TagHeader, to split the record by tenant or part of
// a workload), and an oracle (Report, Analyze) checks the record against
// the limits.
//
// It is an independent yardstick: it shares no metering code with tollgate's
// capacity package (only the capacity.Clock type) and knows nothing of
// Temporal.
//
// A test of your own code against it:
//
//	fp, err := testsuite.New(testsuite.Options{Models: []testsuite.Model{{
//		Name: "gpt-4o-mini", Provider: testsuite.OpenAI,
//		Limits: testsuite.Limits{RequestsPerMinute: 60, TokensPerMinute: 30_000},
//	}}})
//	require.NoError(t, err)
//	defer fp.Close()
//	client := openai.NewClient(option.WithBaseURL(fp.OpenAIBaseURL()),
//		option.WithAPIKey(testsuite.DefaultKey), option.WithMaxRetries(0))
//	summarizeAll(ctx, client, docs) // the code under test
//	report := fp.Report(testsuite.Scope{Key: testsuite.DefaultKey, Model: "gpt-4o-mini"})
//	require.Zero(t, report.RateLimited[testsuite.CauseTokens])
//
// # Token counting
//
// Input tokens follow a deterministic rule, exported so tests can compute
// expectations: CountTokens(text) = ceil(len(text)/4) bytes, and each message
// (and an Anthropic system prompt) adds MessageOverhead; see PromptTokens.
// Output length comes from Options.Output (SeededOutput by default: uniform
// in [1, max_tokens], a function of the seed and the request body), and the
// answer's text counts as exactly that many tokens.
//
// # Accounting
//
// Every request that reaches admission is charged one request, admitted or
// refused (with the refused debt bounded by one bucket). OpenAI charges
// input + max_tokens to TPM at admission and refunds nothing. Anthropic
// charges input tokens other than cache reads to ITPM at admission and the
// output produced to OTPM on completion; a request is refused while the OTPM
// bucket is empty. Anthropic's prompt cache is simulated per scope: a block
// marked with cache_control writes its prefix to the cache for 5 minutes,
// and a later request with the same prefix reads it. A request whose token
// charge exceeds the whole per-minute limit gets OpenAI's "Request too large"
// 429 (for Anthropic, a 429 without retry-after). A request larger than a
// sub-minute bucket is admitted when the bucket is full and leaves it in debt.
//
// Checks run in this order: authentication (401), JSON (400), model (404),
// max_tokens and context window (400), injected faults, then admission:
// request too large, daily quotas (OpenAI 429 insufficient_quota, Anthropic
// 400 "API usage limits"), concurrency, requests, tokens, output tokens.
//
// # Time
//
// All metering runs on Options.Clock, a capacity.Clock (the wall clock by
// default). Tests use a capacitytest.ManualClock and move it instead of
// sleeping; latency (Options.Latency, Faults.SlowLatency) waits on the same
// clock's timers.
//
// Chat completions and Anthropic messages stream as the providers do, as
// server-sent events ending with the usage (OpenAI's only with
// stream_options.include_usage); a streamed Responses API request gets a
// 400.
package testsuite

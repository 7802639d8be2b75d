// Package accounting is how each provider counts a call against its limits:
// a Profile turns a call's capacity.Demand into the Charges it reserves
// (OpenAI charges max_tokens at admission, Anthropic and Gemini count
// output as it is produced) and settles them from the capacity.Usage the
// provider reports. ProfileFor gives the built-in profile of a provider;
// the gate (interceptor) picks it by the scope's provider.
package accounting

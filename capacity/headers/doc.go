// Package headers reads what providers say about their rate limits: the
// x-ratelimit-* and anthropic-ratelimit-* response headers (Parse, into a
// capacity.Observation a store applies with Store.Observe), Retry-After
// (RetryAfter), the response's date (ResponseTime), and a wait or reset
// time in any form providers and the gateways in front of them send
// (ParseReset, ParseDuration).
//
// Every function takes the time as a value and never panics: a header it
// cannot read is left out of the result, never guessed.
package headers

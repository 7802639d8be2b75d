// Package errors classifies LLM provider failures and turns the verdict into
// the error a Temporal activity returns. Callers alias it:
//
//	import tgerrors "github.com/tollgate-dev/tollgate/errors"
//
// A 429 for a per-minute limit means wait and retry; a 429 for a daily quota
// means come back when it resets; a 401 means every model on that credential
// is dead; a 400 fails the same way forever. Classify, ClassifyContext and
// ClassifyHTTP decide which, from the strongest evidence first: the official
// SDKs' typed errors, then the provider's structured fields (HTTP status,
// error code and type, Gemini's QuotaFailure, RetryInfo and ErrorInfo,
// retry-after and rate-limit headers), and only then the message text.
//
// This package imports no provider SDK. A Reader turns an SDK's typed error
// into the Response it stands for; importing errors/openaierr
// (*openai.Error), errors/anthropicerr (*anthropic.Error) or
// errors/geminierr (genai.APIError) registers one (RegisterReader).
//
// Converter.ActivityError turns a Verdict into a *temporal.ApplicationError
// with a stable, namespaced type (TypeRateLimited, ...), NonRetryable for
// terminal classes, a jittered NextRetryDelay for rate limits, and Details the
// workflow decodes with DetailsOf. The Is... predicates work on the error as
// the workflow sees it. Return that error as it is: wrapping it with %w makes
// Temporal ignore its NonRetryable and NextRetryDelay.
//
// Nothing this package builds carries a secret or prompt text: provider
// messages are masked (MaskSecrets), shortened, and stripped of request
// URLs, and the raw SDK error is never the Cause.
package errors

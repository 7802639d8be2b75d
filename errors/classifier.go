package errors

import (
	"context"
	stderrors "errors"
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// DefaultMaxRateLimitWait is the default Classifier.MaxRateLimitWait.
const DefaultMaxRateLimitWait = 120 * time.Second

// Classifier classifies provider failures into Verdicts. The zero value uses
// the documented defaults; a Classifier is a value and safe for concurrent
// use.
type Classifier struct {
	// MaxRateLimitWait is the longest wait a rate limit may ask for and still
	// be a RateLimited wait; a longer one, or one longer than its kind of
	// budget can mean (MaxPerMinuteWait for a per-minute budget), is
	// QuotaExhausted (ReasonWaitExceedsBound) with ResetAt at the end of the
	// wait, cut to the longest reset of its kind (MaxDailyReset,
	// MaxUnknownWait). If zero or negative, DefaultMaxRateLimitWait.
	MaxRateLimitWait time.Duration
	// GeminiDayReset is when Gemini's daily quotas reset, used for ResetAt
	// when a daily quota error carries no retry delay. If its Location is
	// nil, midnight Pacific.
	GeminiDayReset capacity.DayBoundary
}

func (c Classifier) maxRateLimitWait() time.Duration {
	if c.MaxRateLimitWait <= 0 {
		return DefaultMaxRateLimitWait
	}
	return c.MaxRateLimitWait
}

func (c Classifier) geminiDayReset() capacity.DayBoundary {
	if c.GeminiDayReset.Location == nil {
		return geminiDayReset
	}
	return c.GeminiDayReset
}

// Classify returns the verdict on err, a failure of a call to provider p (if
// p is empty, the SDK that produced err names it), as of now on the caller's
// clock. It reads provider SDKs' typed errors anywhere in err's chain
// through the registered Readers (RegisterReader; importing
// errors/openaierr, errors/anthropicerr or errors/geminierr registers one);
// other errors are Canceled (context.Canceled, context.DeadlineExceeded),
// Transient (network errors, EOF, timeouts) or Unknown. An Unknown verdict
// on an official SDK's error whose reader is not registered names the
// package to import in its Message. Classify(p, nil, now) is Unknown.
//
// Classify cannot tell the caller's deadline from a client's own request
// timeout, which also reports context.DeadlineExceeded; ClassifyContext can.
func (c Classifier) Classify(p capacity.Provider, err error, now time.Time) Verdict {
	return c.classify(noContext{}, p, err, now)
}

// noContext stands for "no caller context" in classify: a context that never
// ends, told apart from a real one by its type.
type noContext struct{ context.Context }

// ClassifyContext is Classify for a call made under ctx: an error caused by
// ctx ending is Canceled, while a context error with ctx still live (a
// client's per-request timeout) is Transient.
func (c Classifier) ClassifyContext(ctx context.Context, p capacity.Provider, err error, now time.Time) Verdict {
	return c.classify(ctx, p, err, now)
}

// ClassifyHTTP returns the verdict on a failed response of provider p given
// as its status, headers and body, for hand-written clients. It never fails:
// a response it cannot read is Unknown or classified by status alone.
func (c Classifier) ClassifyHTTP(p capacity.Provider, status int, h http.Header, body []byte, now time.Time) Verdict {
	return c.decideResponse(p, Response{Status: status, Header: h, Body: body}, now)
}

func (c Classifier) decideResponse(p capacity.Provider, r Response, now time.Time) Verdict {
	ev := evidence{sdk: r.Provider, status: r.Status, header: r.Header}
	parseBody(&ev, r.Body)
	return c.decide(p, &ev, now)
}

func (c Classifier) classify(ctx context.Context, p capacity.Provider, err error, now time.Time) Verdict {
	if err == nil {
		return Verdict{Class: Unknown, Provider: p, Retryable: true}
	}
	if r, ok := readResponse(err); ok {
		return c.decideResponse(p, r, now)
	}
	if ctxErr, ok := contextCause(ctx, err); ok {
		return Verdict{Class: Canceled, Provider: p, Message: sanitizeMessage(ctxErr.Error()), ctxErr: ctxErr}
	}
	class := Unknown
	if isTransient(err) {
		class = Transient
	}
	msg := errorMessage(err)
	if reader, ok := unreadSDKError(err, sdkReaderPackages); class == Unknown && ok {
		msg = sanitizeMessage("unread SDK error (import " + reader + "): " + msg)
	}
	return Verdict{Class: class, Provider: p, Retryable: class.Retryable(), Message: msg}
}

// contextCause reports whether err is the end of the caller's context and
// returns the context's error. Without ctx, any context error counts.
func contextCause(ctx context.Context, err error) (error, bool) {
	if _, none := ctx.(noContext); !none && ctx != nil {
		if cerr := ctx.Err(); cerr != nil && (stderrors.Is(err, context.Canceled) ||
			stderrors.Is(err, context.DeadlineExceeded) || stderrors.Is(err, cerr) || isTransient(err)) {
			return cerr, true
		}
		return nil, false
	}
	switch {
	case stderrors.Is(err, context.Canceled):
		return context.Canceled, true
	case stderrors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded, true
	}
	return nil, false
}

var defaultClassifier Classifier

// Classify is Classifier{}.Classify: the defaults.
func Classify(p capacity.Provider, err error, now time.Time) Verdict {
	return defaultClassifier.Classify(p, err, now)
}

// ClassifyContext is Classifier{}.ClassifyContext: the defaults.
func ClassifyContext(ctx context.Context, p capacity.Provider, err error, now time.Time) Verdict {
	return defaultClassifier.ClassifyContext(ctx, p, err, now)
}

// ClassifyHTTP is Classifier{}.ClassifyHTTP: the defaults.
func ClassifyHTTP(p capacity.Provider, status int, h http.Header, body []byte, now time.Time) Verdict {
	return defaultClassifier.ClassifyHTTP(p, status, h, body, now)
}

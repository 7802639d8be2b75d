package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/interceptor"
)

// ClientOptions configures the provider SDK clients of the activities
// (OpenAIOptions, AnthropicOptions and GeminiOptions are this type).
type ClientOptions struct {
	// Credentials resolves credential scope names to API keys. Required.
	Credentials Credentials
	// BaseURL is the API's base URL. If empty, the SDK's default; set it
	// for proxies, compatible gateways or the testsuite's fake provider
	// (FakeProvider.OpenAIBaseURL, AnthropicBaseURL, GeminiBaseURL).
	BaseURL string
	// HTTPClient sends the requests. If nil, the SDK's default client.
	HTTPClient *http.Client
	// RequestTimeout bounds one request. If zero, only the activity's
	// context bounds it.
	RequestTimeout time.Duration
	// Sink receives the text of streamed calls (OpenAI.ChatCompletionStream,
	// Anthropic.CreateMessageStream) as it arrives. If nil, the text is only in the result.
	Sink StreamSink
}

// StreamSink receives the text of a streamed call as it arrives, delta by
// delta and in order, for example to publish it to a user interface; ctx
// is the activity's (activity.GetInfo says which workflow and call). It
// runs between reads of the stream, so it should be quick. An error stops
// the stream and fails the attempt: the call was sent, its outcome is
// unknown, and it keeps its whole reservation.
type StreamSink func(ctx context.Context, delta string) error

func (o ClientOptions) check(name string) error {
	if o.Credentials == nil {
		return errors.New("activities: " + name + ".Credentials is required")
	}
	if o.RequestTimeout < 0 {
		return fmt.Errorf("activities: %s.RequestTimeout is %v; want >= 0", name, o.RequestTimeout)
	}
	return nil
}

// prepare checks a request before anything is sent: an invalid request is a
// BadRequest, a credential the worker lacks is Misconfigured; either way the
// gate is told the call never left. It returns the credential's key: for a
// key pool (interceptor.Options.Pools), the key of the member the gate chose.
func (o ClientOptions) prepare(ctx context.Context, what string, invalid error, credential string) (string, error) {
	if invalid != nil {
		return "", notSent(ctx, badRequest(what+": "+invalid.Error()))
	}
	key, err := o.Credentials.APIKey(ctx, interceptor.Credential(ctx, credential))
	if err != nil {
		return "", notSent(ctx, misconfigured(what+": "+err.Error()))
	}
	return key, nil
}

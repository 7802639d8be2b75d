package activities

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ClientOptions configures the provider SDK clients of the activities
// (OpenAIOptions and AnthropicOptions are this type).
type ClientOptions struct {
	// Credentials resolves credential scope names to API keys. Required.
	Credentials Credentials
	// BaseURL is the API's base URL. If empty, the SDK's default; set it
	// for proxies, compatible gateways or the testsuite's fake provider
	// (FakeProvider.OpenAIBaseURL, AnthropicBaseURL).
	BaseURL string
	// HTTPClient sends the requests. If nil, the SDK's default client.
	HTTPClient *http.Client
	// RequestTimeout bounds one request. If zero, only the activity's
	// context bounds it.
	RequestTimeout time.Duration
}

func (o ClientOptions) check(name string) error {
	if o.Credentials == nil {
		return errors.New("activities: " + name + ".Credentials is required")
	}
	if o.RequestTimeout < 0 {
		return fmt.Errorf("activities: %s.RequestTimeout is %v; want >= 0", name, o.RequestTimeout)
	}
	return nil
}

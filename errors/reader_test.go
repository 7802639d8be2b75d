package errors

import (
	stderrors "errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

// fakeSDKError stands for a provider SDK's typed error.
type fakeSDKError struct {
	status int
	header http.Header
	body   string
}

func (e *fakeSDKError) Error() string { return fmt.Sprintf("fake SDK: %d", e.status) }

func init() {
	RegisterReader(func(err error) (Response, bool) {
		e, ok := stderrors.AsType[*fakeSDKError](err)
		if !ok {
			return Response{}, false
		}
		return Response{Provider: capacity.Anthropic, Status: e.status, Header: e.header, Body: []byte(e.body)}, true
	})
}

func TestRegisteredReader(t *testing.T) {
	h := fixtureHeader(map[string]string{"retry-after": "7", "date": fixtureTime.Format(http.TimeFormat)})
	body := `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`
	sdkErr := fmt.Errorf("call: %w", &fakeSDKError{status: 429, header: h, body: body})

	fromHTTP := ClassifyHTTP(capacity.Anthropic, 429, h, []byte(body), fixtureTime)
	require.Equal(t, RateLimited, fromHTTP.Class)
	require.Equal(t, fromHTTP, Classify(capacity.Anthropic, sdkErr, fixtureTime))
	require.Equal(t, fromHTTP, Classify("", sdkErr, fixtureTime), "the reader names the provider")
	require.Equal(t, capacity.OpenAI, Classify(capacity.OpenAI, sdkErr, fixtureTime).Provider, "the caller's provider wins")
}

func TestRegisterNilReaderPanics(t *testing.T) {
	require.Panics(t, func() { RegisterReader(nil) })
}

func TestUnreadSDKError(t *testing.T) {
	for _, err := range []error{nil, fmt.Errorf("plain"), &fakeSDKError{status: 429}} {
		_, ok := unreadSDKError(err, sdkReaderPackages)
		require.False(t, ok, "%v", err)
	}

	// A type of this package stands for an SDK's: the hint names its reader.
	const self = "github.com/tollgate-dev/tollgate/errors"
	sdks := []sdkReader{{"github.com/openai/openai-go", "openaierr"}, {self, self + "/fakeerr"}}
	reader, ok := unreadSDKError(fmt.Errorf("call: %w", unreadError{}), sdks)
	require.True(t, ok)
	require.Equal(t, self+"/fakeerr", reader)
	_, ok = unreadSDKError(stderrors.Join(fmt.Errorf("other"), &unreadError{}), sdks)
	require.True(t, ok, "a joined error is searched too")
}

type unreadError struct{}

func (unreadError) Error() string { return "API error: 429 Too Many Requests" }

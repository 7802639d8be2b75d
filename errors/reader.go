package errors

import (
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Response is a failed provider response as the provider sent it: what
// ClassifyHTTP reads, and what a Reader recovers from an SDK's typed error.
type Response struct {
	// Provider is the provider that answered; Classify uses it when its
	// caller names none.
	Provider capacity.Provider
	Status   int
	Header   http.Header
	// Body is the error body in the provider's wire shape
	// ({"error": {...}}); what an SDK parsed into fields is re-encoded so.
	Body []byte
}

// A Reader recovers the failed response behind a provider SDK's typed error
// anywhere in err's chain. ok is false when err holds none of its SDK's
// errors. A Reader must not consume or change err.
type Reader func(err error) (r Response, ok bool)

var (
	readersMu sync.Mutex
	readers   atomic.Pointer[[]Reader]
)

// RegisterReader adds r to the readers Classify and ClassifyContext try, in
// the order registered, before they fall back to context and network errors.
// The reader packages register theirs when imported (errors/openaierr,
// errors/anthropicerr, errors/geminierr), as database/sql drivers do; this
// package imports no provider SDK. RegisterReader is safe for concurrent use
// and panics if r is nil.
func RegisterReader(r Reader) {
	if r == nil {
		panic("tollgate/errors: RegisterReader of a nil Reader")
	}
	readersMu.Lock()
	defer readersMu.Unlock()
	var next []Reader
	if old := readers.Load(); old != nil {
		next = append(next, *old...)
	}
	next = append(next, r)
	readers.Store(&next)
}

// readResponse asks the registered readers, first match wins.
func readResponse(err error) (Response, bool) {
	if rs := readers.Load(); rs != nil {
		for _, r := range *rs {
			if resp, ok := r(err); ok {
				return resp, true
			}
		}
	}
	return Response{}, false
}

// sdkReaderPackages maps the module of each official SDK to the package
// whose import registers its reader.
var sdkReaderPackages = []sdkReader{
	{"github.com/openai/openai-go", "github.com/tollgate-dev/tollgate/errors/openaierr"},
	{"github.com/anthropics/anthropic-sdk-go", "github.com/tollgate-dev/tollgate/errors/anthropicerr"},
	{"google.golang.org/genai", "github.com/tollgate-dev/tollgate/errors/geminierr"},
}

type sdkReader struct{ sdk, reader string }

// unreadSDKError returns the reader package to import when err's chain holds
// a typed error of one of the SDKs (by package path) that no registered
// reader read.
func unreadSDKError(err error, sdks []sdkReader) (string, bool) {
	for _, e := range chain(err, 0) {
		t := reflect.TypeOf(e)
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		pkg := t.PkgPath()
		for _, s := range sdks {
			if strings.HasPrefix(pkg, s.sdk) {
				return s.reader, true
			}
		}
	}
	return "", false
}

// chain lists err and what it wraps (Unwrap() error and Unwrap() []error),
// depth first and at most 32 errors deep.
func chain(err error, depth int) []error {
	if err == nil || depth > 32 {
		return nil
	}
	out := []error{err}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		out = append(out, chain(u.Unwrap(), depth+1)...)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			out = append(out, chain(e, depth+1)...)
		}
	}
	return out
}

// Package openaierr reads the OpenAI SDK's errors (*openai.Error of
// github.com/openai/openai-go/v3) for tollgate's classifier. Importing it
// registers Read with errors.RegisterReader, so Classify, and the gate in a
// worker that imports it, classify an *openai.Error an activity returns as it
// is:
//
//	import _ "github.com/tollgate-dev/tollgate/errors/openaierr"
//
// The tollgate activities package imports it already.
package openaierr

import (
	stderrors "errors"

	"github.com/openai/openai-go/v3"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
)

func init() { tgerrors.RegisterReader(Read) }

// Read returns the failed response behind the first *openai.Error in err's
// chain: status, headers, and the body rebuilt from the "error" object the
// SDK kept (RawJSON). ok is false if err holds none.
func Read(err error) (r tgerrors.Response, ok bool) {
	e, ok := stderrors.AsType[*openai.Error](err)
	if !ok || e == nil {
		return tgerrors.Response{}, false
	}
	r = tgerrors.Response{Provider: capacity.OpenAI, Status: e.StatusCode}
	if e.Response != nil {
		r.Header = e.Response.Header
		if r.Status == 0 {
			r.Status = e.Response.StatusCode
		}
	}
	if raw := e.RawJSON(); raw != "" {
		// The SDK unwraps the body's "error" member; wrap it back.
		r.Body = []byte(`{"error":` + raw + `}`)
	}
	return r, true
}

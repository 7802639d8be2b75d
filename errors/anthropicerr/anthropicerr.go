// Package anthropicerr reads the Anthropic SDK's errors (*anthropic.Error of
// github.com/anthropics/anthropic-sdk-go) for tollgate's classifier.
// Importing it registers Read with errors.RegisterReader, so Classify, and
// the gate in a worker that imports it, classify an *anthropic.Error an
// activity returns as it is:
//
//	import _ "github.com/tollgate-dev/tollgate/errors/anthropicerr"
//
// The tollgate activities package imports it already.
package anthropicerr

import (
	stderrors "errors"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
)

func init() { tgerrors.RegisterReader(Read) }

// Read returns the failed response behind the first *anthropic.Error in
// err's chain: status, headers and the whole body (RawJSON). ok is false if
// err holds none.
func Read(err error) (r tgerrors.Response, ok bool) {
	e, ok := stderrors.AsType[*anthropic.Error](err)
	if !ok || e == nil {
		return tgerrors.Response{}, false
	}
	r = tgerrors.Response{Provider: capacity.Anthropic, Status: e.StatusCode, Body: []byte(e.RawJSON())}
	if e.Response != nil {
		r.Header = e.Response.Header
		if r.Status == 0 {
			r.Status = e.Response.StatusCode
		}
	}
	return r, true
}

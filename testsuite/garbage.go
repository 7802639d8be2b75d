package testsuite

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
)

// garbageKind is the kind of body a Faults.Garbage answer has.
type garbageKind int

const (
	// garbageHTML is an HTML error page, as a proxy in front of the
	// provider sends, without the provider's headers.
	garbageHTML garbageKind = iota
	// garbageTruncated is the answer, with its headers, cut off halfway.
	garbageTruncated
	// garbageNull is the JSON literal null.
	garbageNull
	// garbageWrongShape is a JSON object that is not an answer.
	garbageWrongShape
	numGarbageKinds
)

// writeGarbage answers w with status 200 and a body of kind k that is not
// an answer. headers sets the provider's own headers (rate limits, Date);
// answer writes the real answer, which garbageTruncated cuts.
func writeGarbage(w http.ResponseWriter, k garbageKind, seq uint64, headers func(http.Header), answer func(http.ResponseWriter)) {
	h := w.Header()
	switch k {
	case garbageHTML:
		body := []byte("<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>\n")
		h["Content-Type"] = []string{"text/html"}
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	case garbageTruncated:
		rec := httptest.NewRecorder()
		answer(rec)
		for name, v := range rec.Header() {
			h[name] = v
		}
		headers(h)
		body := rec.Body.Bytes()
		body = body[:len(body)/2]
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	case garbageNull:
		headers(h)
		writeJSON(w, http.StatusOK, []byte("null"))
	default:
		headers(h)
		writeJSON(w, http.StatusOK, []byte(`{"status":"ok","request":"`+strconv.FormatUint(seq, 10)+`","result":{"pending":true}}`))
	}
}

// garbledValues are what Faults.BadHeaders puts in rate-limit headers:
// each a value a broken proxy or provider could send, none a reading of the
// real budget.
var garbledValues = []string{
	"-1", "NaN", "99999999999999999999", "", "12abc", "1e309", "-5s", "soon", "0", "1",
	"9223372036854775807", "0.5", "  ", "2m-3s", "18446744073709551616ms",
}

// garbleHeaders replaces the value of every rate-limit header in h (and
// retry-after) with a garbled one, chosen by seq, and sets a Date of 1970.
func garbleHeaders(h http.Header, seq uint64) {
	var names []string
	for name := range h {
		lower := strings.ToLower(name)
		if strings.HasPrefix(lower, "x-ratelimit-") || strings.HasPrefix(lower, "anthropic-ratelimit-") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	i := int(seq % uint64(len(garbledValues)))
	for _, name := range names {
		h[name] = []string{garbledValues[i%len(garbledValues)]}
		i++
	}
	h["Retry-After"] = []string{garbledValues[i%len(garbledValues)]}
	h["Date"] = []string{"Thu, 01 Jan 1970 00:00:00 GMT"}
}

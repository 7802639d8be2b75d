package testsuite

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// parsed is a request body decoded by a dialect.
type parsed struct {
	model       string
	stream      bool
	input       int64 // prompt tokens by the CountTokens rule
	maxTokens   int64 // as sent; 0 if absent
	hasMax      bool
	breakpoints []breakpoint
	thinking    int64 // Gemini thinkingBudget; 0 if absent
	// embedding is set for an embeddings request.
	embedding *embeddingRequest
	// shape is what the answer carries beside text: a tool call,
	// structured output.
	shape answerShape
	// streamUsage asks a streamed answer for a last chunk with the usage
	// (OpenAI's stream_options.include_usage).
	streamUsage bool
}

// failure is an error answer, rendered by a dialect in its provider's shape.
type failure struct {
	status     int
	cause      Cause
	errType    string // OpenAI error.type / Anthropic error.type
	code       string // OpenAI error.code; "" sends null
	param      string // OpenAI error.param; "" sends null
	message    string
	retryAfter time.Duration // > 0: send retry-after (Gemini: RetryInfo)
	quota      *geminiQuota  // Gemini: the QuotaFailure violation
	reason     string        // Gemini: ErrorInfo.reason
}

// answerInfo is a successful answer.
type answerInfo struct {
	model  string
	now    time.Time
	usage  Usage
	maxTok int64
	// thinking is Gemini's thinkingBudget: part of the output is reported
	// as thoughtsTokenCount.
	thinking int64
	// embedding is the embeddings request answered, if it is one.
	embedding *embeddingRequest
	// shape is what the answer carries beside text.
	shape answerShape
	// stream asks for the answer as server-sent events; streamUsage for a
	// last event with the usage.
	stream, streamUsage bool
}

// dialect is one provider's wire format.
type dialect interface {
	provider() Provider
	apiKey(r *http.Request) string
	parse(body []byte) (parsed, *failure)
	prepare(m *Model, req *parsed) (demand, *failure)
	unauthorized() failure
	unknownModel(name string) failure
	bodyTooLarge() failure
	badRequestStatus(status int, msg string) failure
	refused(dec *decision, model string) failure
	injected(c Cause, model string) failure
	rateHeaders(h http.Header, sn *snapshot)
	writeFailure(w http.ResponseWriter, seq uint64, f *failure)
	writeAnswer(w http.ResponseWriter, seq uint64, a *answerInfo)
}

// ServeHTTP routes POST /v1/chat/completions (and /chat/completions) to the
// OpenAI dialect, POST /v1/responses to its Responses API, POST
// /v1/embeddings (and /embeddings) to OpenAI's embeddings, POST /v1/messages to the Anthropic dialect, and POST
// /v1beta/models/{model}:generateContent, :embedContent and
// :batchEmbedContents to Gemini's. Anything else gets an OpenAI-shaped 404
// or 405.
func (p *FakeProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var dl dialect
	path := r.URL.Path
	embedModel, batch, embed := geminiEmbedPath(path)
	switch {
	case path == "/v1/chat/completions", path == "/chat/completions":
		dl = openaiDialect{org: p.opts.Organization}
	case path == "/v1/responses", path == "/responses":
		dl = openaiResponsesDialect{openaiDialect{org: p.opts.Organization}}
	case path == "/v1/embeddings", path == "/embeddings":
		dl = openaiEmbeddingsDialect{openaiDialect{org: p.opts.Organization}}
	case path == "/v1/messages":
		dl = anthropicDialect{}
	case geminiPath(path):
		dl = geminiDialect{model: geminiModel(path)}
	case embed:
		dl = geminiEmbedDialect{geminiDialect: geminiDialect{model: embedModel}, batch: batch}
	default:
		f := failure{status: http.StatusNotFound, cause: CauseBadRequest, errType: "invalid_request_error",
			code: "unknown_url", message: "Unknown request URL: " + r.Method + " " + r.URL.Path + "."}
		openaiDialect{}.writeFailure(w, p.seq.Add(1), &f)
		return
	}
	p.serve(w, r, dl)
}

// serve runs one request through authentication, validation, faults,
// admission, latency and settlement, and records it.
func (p *FakeProvider) serve(w http.ResponseWriter, r *http.Request, dl dialect) {
	e := Entry{Seq: p.seq.Add(1), Provider: dl.provider(), Arrival: p.clock.Now(), Tag: tagOf(r.Header)}
	if id := r.Header.Get("X-Client-Request-Id"); id != "" {
		e.ClientRequestID = id[:min(len(id), MaxClientRequestID)]
	}
	fail := func(f failure, sn *snapshot) {
		if sn != nil {
			dl.rateHeaders(w.Header(), sn)
		}
		p.record(&e, f.status, f.cause) // before answering: a client that reads the answer finds it recorded
		setDate(w.Header(), e.Done)
		dl.writeFailure(w, e.Seq, &f)
	}
	if r.Method != http.MethodPost {
		f := dl.badRequestStatus(http.StatusMethodNotAllowed, "Method "+r.Method+" not allowed; use POST.")
		fail(f, nil)
		return
	}
	e.Scope.Key = dl.apiKey(r)
	body, err := readBody(r, p.opts.MaxBodyBytes)
	switch {
	case errors.Is(err, errBodyTooLarge):
		fail(dl.bodyTooLarge(), nil)
		return
	case err != nil:
		fail(dl.badRequestStatus(http.StatusBadRequest, "The request body could not be read."), nil)
		return
	}
	req, perr := dl.parse(body)
	e.Scope.Model = req.model
	if !p.keyOK(e.Scope.Key) {
		fail(dl.unauthorized(), nil)
		return
	}
	if perr != nil {
		fail(*perr, nil)
		return
	}
	m, ok := p.models[req.model]
	if !ok || m.Provider != dl.provider() {
		fail(dl.unknownModel(req.model), nil)
		return
	}
	if m.Embeddings != (req.embedding != nil) {
		fail(dl.badRequestStatus(http.StatusBadRequest, "The model `"+req.model+"` does not support this endpoint."), nil)
		return
	}
	st := p.scope(e.Scope)
	d, verr := dl.prepare(m, &req)
	if verr != nil {
		_, sn := st.current(e.Arrival)
		fail(*verr, &sn)
		return
	}
	call := Call{Seq: e.Seq, Provider: d.provider, Scope: e.Scope, InputTokens: d.input,
		MaxTokens: d.maxTokens, Hash: fnvBytes(fnvOffset, body)}
	d.output = min(max(p.opts.Output(call), 1), d.maxTokens)

	flt := p.faultSrc.draw(p.faults.Load())
	if flt.early != CauseNone {
		_, sn := st.current(e.Arrival)
		fail(dl.injected(flt.early, m.Name), &sn)
		return
	}

	dec := st.admit(e.Arrival, &d, true)
	e.Charged, e.Remaining = dec.charged, dec.remaining
	if dec.cause != CauseNone {
		f := dl.refused(&dec, m.Name)
		if flt.noRetry {
			f.retryAfter = 0
		}
		fail(f, &dec.snap)
		return
	}
	e.Admitted = true

	var wait time.Duration
	if p.opts.Latency != nil {
		wait = p.opts.Latency(call, d.output)
	}
	canceled := p.sleep(r.Context(), wait+flt.extraWait)
	done := p.clock.Now()
	settled, sn := st.settle(done, &d)
	if p.opts.HeadersAt == HeadersAtAdmission {
		sn = dec.snap
	}
	e.Settled = settled
	e.Usage = Usage{InputTokens: d.input, OutputTokens: d.output,
		CacheReadTokens: d.cacheRead, CacheCreationTokens: d.cacheCreation}
	switch {
	case canceled:
		p.record(&e, 0, CauseCanceled)
		resetConn(w) // never let net/http send an empty 200
	case flt.reset:
		p.record(&e, 0, CauseConnReset)
		resetConn(w)
	default:
		ans := &answerInfo{model: m.Name, now: done, usage: e.Usage, maxTok: d.maxTokens, thinking: req.thinking, embedding: req.embedding, shape: req.shape,
			stream: req.stream, streamUsage: req.streamUsage}
		if flt.garbage {
			p.record(&e, http.StatusOK, CauseGarbage)
			writeGarbage(w, flt.kind, e.Seq, func(h http.Header) {
				dl.rateHeaders(h, &sn)
				setDate(h, done)
			}, func(w http.ResponseWriter) { dl.writeAnswer(w, e.Seq, ans) })
			return
		}
		e.BadHeaders = flt.badHeaders
		p.record(&e, http.StatusOK, CauseNone)
		dl.rateHeaders(w.Header(), &sn)
		setDate(w.Header(), done)
		if flt.badHeaders {
			garbleHeaders(w.Header(), e.Seq)
		}
		dl.writeAnswer(w, e.Seq, ans)
	}
}

// record completes e and appends it to the record.
func (p *FakeProvider) record(e *Entry, status int, c Cause) {
	e.Done = p.clock.Now()
	e.Latency = e.Done.Sub(e.Arrival)
	e.Status, e.Cause = status, c
	p.rec.add(*e)
}

// sleep waits d on the provider's clock and reports whether the client went
// away or the provider closed first.
func (p *FakeProvider) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return false
	}
	t := p.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return false
	case <-ctx.Done():
		return true
	case <-p.done:
		return true
	}
}

var errBodyTooLarge = errors.New("request body too large")

// readBody reads r's body, at most limit bytes.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errBodyTooLarge
	}
	n := r.ContentLength
	if n < 0 || n > 1<<20 {
		n = 512
	}
	buf := make([]byte, 0, n+1)
	for {
		if int64(len(buf)) > limit {
			return nil, errBodyTooLarge
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		k, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if int64(len(buf)) > limit {
		return nil, errBodyTooLarge
	}
	return buf, nil
}

// resetConn closes the client's connection without an answer, with a TCP
// reset where possible.
func resetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler) // net/http closes the connection
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// setDate sets the Date header from the provider's clock, so that clients
// reading Anthropic's reset timestamps relative to it agree with the clock.
func setDate(h http.Header, t time.Time) {
	h["Date"] = []string{t.UTC().Format(http.TimeFormat)}
}

// writeJSON writes a JSON body with status.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// retryAfterSeconds renders a wait as retry-after: whole seconds, rounded
// up, at least 1.
func retryAfterSeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10)
}

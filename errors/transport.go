package errors

import (
	stderrors "errors"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
)

// isTransient reports whether err is a failure of the connection rather than
// an answer: network errors, EOF, timeouts, resets.
func isTransient(err error) bool {
	if stderrors.Is(err, io.EOF) || stderrors.Is(err, io.ErrUnexpectedEOF) ||
		stderrors.Is(err, os.ErrDeadlineExceeded) ||
		stderrors.Is(err, syscall.ECONNRESET) || stderrors.Is(err, syscall.ECONNREFUSED) ||
		stderrors.Is(err, syscall.ECONNABORTED) || stderrors.Is(err, syscall.EPIPE) ||
		stderrors.Is(err, syscall.ETIMEDOUT) || stderrors.Is(err, syscall.EHOSTUNREACH) ||
		stderrors.Is(err, syscall.ENETUNREACH) {
		return true
	}
	if _, ok := stderrors.AsType[*net.OpError](err); ok {
		return true
	}
	if _, ok := stderrors.AsType[*net.DNSError](err); ok {
		return true
	}
	if ne, ok := stderrors.AsType[net.Error](err); ok && ne.Timeout() {
		return true
	}
	// Errors of the HTTP/2 and TLS layers that net/http does not export.
	msg := strings.ToLower(err.Error())
	return containsAny(msg, "connection reset", "broken pipe", "goaway", "unexpected eof",
		"server closed idle connection", "tls handshake timeout", "http2: stream closed",
		"stream error", "connection refused", "use of closed network connection")
}

// errorMessage is a safe message for an error without a response: a
// *url.Error loses its URL, the rest is sanitized.
func errorMessage(err error) string {
	if ue, ok := stderrors.AsType[*url.Error](err); ok && ue.Err != nil {
		return sanitizeMessage(ue.Op + ": " + ue.Err.Error())
	}
	return sanitizeMessage(err.Error())
}

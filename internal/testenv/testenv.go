// Package testenv holds what tollgate's own tests share: loading the provider
// fixtures, header corpus helpers for the fuzz targets, the test Redis and
// headless Chromium.
// It is internal: users test against testsuite, not this.
package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// FixturePath returns the path of a provider fixture file: in
// $TOLLGATE_FIXTURES if set, else in the testdata folder of the package
// under test (go test runs in the package's folder). The module owns its
// fixtures: nothing outside it is read.
func FixturePath(name string) (string, error) {
	if dir := os.Getenv("TOLLGATE_FIXTURES"); dir != "" {
		return filepath.Join(dir, name), nil
	}
	return filepath.Join("testdata", name), nil
}

// LoadFixtures decodes the fixture file name into v, refusing unknown
// fields when strict (so a new expectation is never silently skipped). A
// missing or empty file fails tb.
func LoadFixtures(tb testing.TB, name string, v any, strict bool) {
	tb.Helper()
	path, err := FixturePath(name)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("testenv: reading fixtures (set TOLLGATE_FIXTURES to their folder): %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		tb.Fatalf("testenv: %s: %v", path, err)
	}
}

// Header builds the header net/http would hand over (canonical keys).
func Header(m map[string]string) http.Header {
	h := make(http.Header, len(m))
	for k, v := range m {
		h.Set(k, v)
	}
	return h
}

// HeaderText renders m as sorted "key: value" lines, the fuzz corpus format.
func HeaderText(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + ": " + m[k] + "\n")
	}
	return b.String()
}

// ParseHeaderText is the inverse of HeaderText for arbitrary input.
func ParseHeaderText(s string) http.Header {
	h := http.Header{}
	for line := range strings.SplitSeq(s, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	return h
}

// RedisAddr is where tests find Redis: $TOLLGATE_REDIS_ADDR, by default the
// throwaway server of `make redis`.
func RedisAddr() string {
	if a := os.Getenv("TOLLGATE_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6390"
}

// RedisClient returns a client on the test Redis, closed when tb ends. If
// Redis does not answer, tb fails when $CI is set (a green CI must not hide
// a missing install step) and is skipped otherwise.
func RedisClient(tb testing.TB) *redis.Client {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: RedisAddr(), PoolSize: 64})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		msg := "no Redis at " + RedisAddr() + " (" + err.Error() + "); start one with `make redis` or set TOLLGATE_REDIS_ADDR"
		if os.Getenv("CI") != "" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

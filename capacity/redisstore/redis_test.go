package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// redisAddr is where tests find Redis: TOLLGATE_REDIS_ADDR, by default the
// throwaway server of `make redis`.
func redisAddr() string {
	if a := os.Getenv("TOLLGATE_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6390"
}

// testClient returns a client on the test Redis. If Redis does not answer,
// the test fails when CI is set and is skipped otherwise.
func testClient(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr(), PoolSize: 64})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		msg := "no Redis at " + redisAddr() + " (" + err.Error() + "); start one with `make redis` or set TOLLGATE_REDIS_ADDR"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// testPrefix returns a fresh random key prefix and deletes its keys when the
// test ends.
func testPrefix(t testing.TB, rdb redis.UniversalClient) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "tgtest-" + hex.EncodeToString(b[:])
	t.Cleanup(func() { deleteKeys(t, rdb, prefix) })
	return prefix
}

// deleteKeys removes every key of prefix (all inside "{prefix:...}").
func deleteKeys(t testing.TB, rdb redis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, "{"+prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := rdb.Del(ctx, keys[:n]...).Err(); err != nil {
			t.Logf("cleanup of %s: %v", prefix, err)
			return
		}
		keys = keys[n:]
	}
}

// newTestStore returns a Store with a fresh prefix on the test Redis.
func newTestStore(t testing.TB, opts Options) (*Store, *redis.Client) {
	t.Helper()
	rdb := testClient(t)
	if opts.Prefix == "" {
		opts.Prefix = testPrefix(t, rdb)
	}
	s, err := New(rdb, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, rdb
}

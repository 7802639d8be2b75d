package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// redisAddr is where tests find Redis (testenv.RedisAddr).
func redisAddr() string { return testenv.RedisAddr() }

// testClient returns a client on the test Redis (testenv.RedisClient).
func testClient(t testing.TB) *redis.Client { return testenv.RedisClient(t) }

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

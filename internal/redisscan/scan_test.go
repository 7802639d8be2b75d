package redisscan_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/internal/redisscan"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// put writes n keys {tag-i}:k and one that does not match.
func put(t *testing.T, rdb redis.UniversalClient, n int) {
	ctx := context.Background()
	for i := range n {
		require.NoError(t, rdb.Set(ctx, fmt.Sprintf("{tag-%d}:k", i), 1, 0).Err())
	}
	require.NoError(t, rdb.Set(ctx, "other", 1, 0).Err())
}

func TestKeysOnOneServer(t *testing.T) {
	srv := testenv.StartRedisServer(t, "")
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	put(t, rdb, 50)
	seen := map[string]bool{}
	require.NoError(t, redisscan.Keys(context.Background(), rdb, "{tag-*}:k", 0, func(k string) { seen[k] = true }))
	assert.Len(t, seen, 50)
	assert.False(t, seen["other"])

	n := 0
	require.NoError(t, redisscan.Keys(context.Background(), rdb, "*", 10, func(string) { n++ }))
	assert.LessOrEqual(t, n, 10, "at most most keys a node")
}

// TestKeysOnACluster scans the masters at once and calls fn one key at a
// time: the race detector sees the plain map written from every master.
func TestKeysOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-master cluster")
	}
	rdb := testenv.StartRedisCluster(t, 3).Client(t)
	put(t, rdb, 300)
	seen := map[string]bool{}
	require.NoError(t, redisscan.Keys(context.Background(), rdb, "{tag-*}:k", 0, func(k string) { seen[k] = true }))
	assert.Len(t, seen, 300, "every master's keys")
}

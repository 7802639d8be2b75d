package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// TestCluster runs the contract suite through a *redis.ClusterClient on a
// one-node Redis Cluster: every script's keys must hash to one slot (Redis
// refuses CROSSSLOT) and release messages travel by sharded pub/sub.
func TestCluster(t *testing.T) {
	t.Parallel()
	srv := startRedisCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr()}})
	defer rdb.Close()
	storetest.Run(t, func(t *testing.T, clock capacity.Clock) capacity.Store {
		s, err := New(rdb, Options{Prefix: "cluster-" + t.Name(), Clock: clock})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// startRedisCluster starts a one-node Redis Cluster owning every slot.
func startRedisCluster(t *testing.T) *testenv.RedisServer {
	t.Helper()
	srv := testenv.StartRedisServer(t, "", "--cluster-enabled", "yes", "--cluster-config-file", t.TempDir()+"/nodes.conf")
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	ctx := context.Background()
	require.NoError(t, c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err())
	require.Eventually(t, func() bool {
		info, err := c.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	}, 15*time.Second, 50*time.Millisecond, "cluster never became ok")
	return srv
}

// Package redisscan lists Redis keys by pattern on a single server or on
// every master of a Redis Cluster.
package redisscan

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Keys calls fn with each key matching match (a SCAN pattern), on rdb or,
// for a *redis.ClusterClient, on every master. The masters are scanned at
// once, but fn is called one key at a time, so it may write to maps and
// slices freely. A key may be seen twice (SCAN's guarantee), and if most is
// positive, at most most keys are looked at per node. It returns the first
// scan error.
func Keys(ctx context.Context, rdb redis.UniversalClient, match string, most int, fn func(key string)) error {
	var mu sync.Mutex
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, match, 1000).Iterator()
		for n := 0; (most <= 0 || n < most) && iter.Next(ctx); n++ {
			mu.Lock()
			fn(iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	}
	return scan(ctx, rdb)
}

package assistantbatch

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ClearPrefix deletes every key of a redisstore prefix ({prefix:...}) on
// rdb, so a demo run starts with a fresh budget and an empty cost ledger.
// It fails if Redis cannot be reached, or the prefix would match another's.
func ClearPrefix(ctx context.Context, rdb redis.UniversalClient, prefix string) error {
	if prefix == "" || strings.ContainsAny(prefix, "{}*?[]\\") {
		return fmt.Errorf("prefix %q: want a plain name", prefix)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		return err
	}
	iter := rdb.Scan(ctx, 0, "{"+prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		if err := rdb.Del(ctx, iter.Val()).Err(); err != nil {
			return err
		}
	}
	return iter.Err()
}

package redisstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Scopes lists the scopes that have state in Redis under the store's
// prefix, sorted by key: every scope some worker used recently enough that
// its state has not expired. It scans (SCAN, on every master of a cluster),
// so it is for operators and tools, not for the admission path.
func (s *Store) Scopes(ctx context.Context) ([]capacity.Scope, error) {
	return s.scanScopes(ctx, stateInfix, "scopes")
}

// scanScopes lists the scopes that have a key {prefix:...}INFIXscope-key,
// sorted by key, scanning every master of a cluster; what names the listing
// in errors.
func (s *Store) scanScopes(ctx context.Context, infix, what string) ([]capacity.Scope, error) {
	match := "{" + s.opts.Prefix + ":*}" + infix + "*"
	var mu sync.Mutex // ForEachMaster scans the masters at once
	seen := map[string]capacity.Scope{}
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			i := strings.Index(key, "}"+infix)
			if i < 0 {
				continue
			}
			sc, err := capacity.ParseScopeKey(key[i+1+len(infix):])
			if err != nil {
				continue // not a scope key of ours
			}
			mu.Lock()
			seen[sc.Key()] = sc
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, s.rdb)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: listing %s: %v", capacity.ErrStoreUnavailable, what, err)
	}
	out := make([]capacity.Scope, 0, len(seen))
	for _, sc := range seen {
		out = append(out, sc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out, nil
}

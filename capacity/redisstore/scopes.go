package redisstore

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/redisscan"
)

// Scopes lists the scopes that have state in Redis under the store's
// prefix, sorted by key: every scope some worker used recently enough that
// its state has not expired. It scans (SCAN, on every master of a cluster),
// so it is for operators and tools, not for the admission path.
func (s *Store) Scopes(ctx context.Context) ([]capacity.Scope, error) {
	if s.rec != nil {
		return s.scanScopes(ctx, recInfix, "scopes")
	}
	return s.scanScopes(ctx, stateInfix, "scopes")
}

// scanScopes lists the scopes that have a key {prefix:...}INFIXscope-key,
// sorted by key, scanning every master of a cluster; what names the listing
// in errors.
func (s *Store) scanScopes(ctx context.Context, infix, what string) ([]capacity.Scope, error) {
	match := "{" + s.opts.Prefix + ":*}" + infix + "*"
	seen := map[string]capacity.Scope{}
	err := redisscan.Keys(ctx, s.rdb, match, 0, func(key string) {
		i := strings.Index(key, "}"+infix)
		if i < 0 {
			return
		}
		sc, err := capacity.ParseScopeKey(key[i+1+len(infix):])
		if err != nil {
			return // not a scope key of ours
		}
		seen[sc.Key()] = sc
	})
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

package redisstore

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/redisscan"
)

// Scopes lists the scopes that have state in Redis under the store's
// prefix, the scripts' or the records engine's, sorted by key: every scope
// some worker used recently enough that its state has not expired. It scans
// (SCAN, on every master of a cluster), so it is for operators and tools,
// not for the admission path.
func (s *Store) Scopes(ctx context.Context) ([]capacity.Scope, error) {
	scripts, err := s.scanScopes(ctx, stateInfix, "scopes")
	if err != nil {
		return nil, err
	}
	records, err := s.scanScopes(ctx, recInfix, "scopes")
	if err != nil {
		return nil, err
	}
	all := append(scripts, records...)
	sort.Slice(all, func(i, j int) bool { return all[i].Key() < all[j].Key() })
	return slices.CompactFunc(all, func(a, b capacity.Scope) bool { return a.Key() == b.Key() }), nil
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

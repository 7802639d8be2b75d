package redisstore

import (
	"context"
	"fmt"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Observe implements capacity.Store.
func (s *Store) Observe(ctx context.Context, sc capacity.Scope, obs capacity.Observation) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sc.Validate(); err != nil {
		return err
	}
	err := s.down("observe")
	if err == nil {
		err = s.observe(ctx, sc, obs)
	}
	if err != nil && s.fallback != nil && isUnavailable(err) {
		return s.fallback.mem.Observe(ctx, sc, obs)
	}
	return err
}

func (s *Store) observe(ctx context.Context, sc capacity.Scope, obs capacity.Observation) error {
	return s.route(sc, func() error {
		return s.rec.observe(ctx, sc, obs)
	}, func() error {
		return s.observeScripts(ctx, sc, obs)
	})
}

// observeScripts applies obs with the scripts.
func (s *Store) observeScripts(ctx context.Context, sc capacity.Scope, obs capacity.Observation) error {
	k := s.keysFor(sc)
	r, _, err := s.do(k, s.observeOp(ctx, k, obs))
	if err != nil {
		return err
	}
	if kind := r.str(); r.err != nil || kind != "ok" {
		return fmt.Errorf("%w: observe: result %q %v", ErrBadReply, kind, r.err)
	}
	return nil
}

// observeOp returns obs as an operation of a batch: observations share a
// script call with the scope's reserves and settles (a model call's
// response brings one each time).
func (s *Store) observeOp(ctx context.Context, k *scopeKeys, obs capacity.Observation) *op {
	b1, b2 := s.knownBoundsMicros(k)
	w := newLayoutWriter(observeLayout).put("day_boundary", b1).put("next_boundary", b2)
	var mark, excluded, inflight []any
	for d := capacity.Requests; d <= capacity.Tokens; d++ {
		od := obs.Dims[d]
		w.put("has_limit."+d.String(), boolArg(od.HasLimit)).put("limit."+d.String(), od.Limit).
			put("has_remaining."+d.String(), boolArg(od.HasRemaining)).put("remaining."+d.String(), od.Remaining)
		mark = append(mark, obs.Mark.Granted[d])
		excluded = append(excluded, boolArg(od.InFlightExcluded))
		inflight = append(inflight, obs.Mark.InFlight[d])
	}
	fields := w.put("mark_valid", boolArg(obs.Mark.Valid)).put("mark", mark...).
		put("excluded", excluded...).put("inflight", inflight...).put("mark_seq", obs.Mark.Seq).done()
	return &op{ctx: ctx, code: opObserve, fields: fields}
}

// boolInt is 1 for true, else 0.
func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

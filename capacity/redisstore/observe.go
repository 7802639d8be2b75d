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
	fields := make([]any, 0, observeFields)
	fields = append(fields, b1, b2)
	for d := capacity.Requests; d <= capacity.Tokens; d++ {
		od := obs.Dims[d]
		fields = append(fields, boolArg(od.HasLimit), od.Limit, boolArg(od.HasRemaining), od.Remaining)
	}
	fields = append(fields, boolArg(obs.Mark.Valid))
	for d := capacity.Requests; d <= capacity.Tokens; d++ {
		fields = append(fields, obs.Mark.Granted[d])
	}
	for d := capacity.Requests; d <= capacity.Tokens; d++ {
		fields = append(fields, boolArg(obs.Dims[d].InFlightExcluded))
	}
	for d := capacity.Requests; d <= capacity.Tokens; d++ {
		fields = append(fields, obs.Mark.InFlight[d])
	}
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

package redisstore

import (
	"context"
	"strconv"

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
	b1, b2 := s.knownBounds(k)
	args := s.commonArgs(k, b1, b2, 21)
	for d := capacity.Requests; d <= capacity.Tokens; d++ {
		od := obs.Dims[d]
		args = append(args, flag(od.HasLimit), od.Limit, flag(od.HasRemaining), od.Remaining)
	}
	args = append(args, flag(obs.Mark.Valid))
	for d := capacity.Requests; d <= capacity.Tokens; d++ {
		args = append(args, strconv.FormatFloat(obs.Mark.Granted[d], 'g', -1, 64))
	}
	_, _, err := s.run(ctx, "observe", scriptObserve, k, args)
	return err
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

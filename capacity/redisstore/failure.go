package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// AddFailure implements capacity.Store. Each call's count is one small key,
// shared by every worker and gone ttl after the call's last failure.
func (s *Store) AddFailure(ctx context.Context, sc capacity.Scope, call string, ttl time.Duration) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if call == "" || ttl <= 0 {
		return 0, fmt.Errorf("%w: AddFailure needs a call and a positive ttl", capacity.ErrInvalidRequest)
	}
	if err := sc.Validate(); err != nil {
		return 0, err
	}
	err := s.down("addfailure")
	if err == nil {
		var n int
		if n, err = s.addFailure(ctx, sc, call, ttl); err == nil {
			return n, nil
		}
	}
	if s.fallback != nil && isUnavailable(err) {
		return s.fallback.mem.AddFailure(ctx, sc, call, ttl)
	}
	return 0, err
}

// addFailure counts the failure in Redis.
func (s *Store) addFailure(ctx context.Context, sc capacity.Scope, call string, ttl time.Duration) (int, error) {
	var n int
	err := s.route(sc, func() (err error) {
		n, err = s.rec.addFailure(ctx, sc, call, ttl)
		return err
	}, func() (err error) {
		n, err = s.addFailureScripts(ctx, sc, call, ttl)
		return err
	})
	return n, err
}

// addFailureScripts counts the failure with the scripts' failure script: a
// key of the call's, beside the scope's state.
func (s *Store) addFailureScripts(ctx context.Context, sc capacity.Scope, call string, ttl time.Duration) (int, error) {
	k := s.keysFor(sc)
	v, err := s.call(ctx, s.scripts.failure, []string{k.failure + call, k.keys[keyRecords]}, []any{s.nowArg(), ttl.Microseconds()}, false).Result()
	if err != nil {
		return 0, s.failed(ctx, "addfailure", err)
	}
	s.up()
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("%w: addfailure: got %T, want an integer", ErrBadReply, v)
	}
	return int(n), nil
}

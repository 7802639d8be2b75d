package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Settle implements capacity.Store. The release is announced to every
// worker's waiters on the scope.
func (s *Store) Settle(ctx context.Context, lease capacity.Lease, final capacity.Charges) error {
	_, err := s.settle(ctx, lease, final)
	return err
}

// settle settles lease and returns the store's time of the settlement (zero
// if the scope's state was gone).
func (s *Store) settle(ctx context.Context, lease capacity.Lease, final capacity.Charges) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	if err := lease.Scope.Validate(); err != nil {
		return time.Time{}, err
	}
	if s.fallback != nil && s.fallback.owns(lease) {
		err := s.fallback.settle(ctx, lease, final)
		s.notify.wake(lease.Scope.Key(), 1)
		return time.Now(), err
	}
	if err := s.down("settle"); err != nil {
		return time.Time{}, err
	}
	var at time.Time
	err := s.route(lease.Scope, func() (err error) {
		at, err = s.rec.settle(ctx, lease, final)
		return err
	}, func() (err error) {
		at, err = s.settleScripts(ctx, lease, final)
		return err
	})
	return at, err
}

// settleScripts settles lease with the scripts.
func (s *Store) settleScripts(ctx context.Context, lease capacity.Lease, final capacity.Charges) (time.Time, error) {
	k := s.keysFor(lease.Scope)
	r, h, err := s.do(k, s.settleOp(ctx, k, lease, final))
	if err != nil {
		return time.Time{}, err
	}
	switch kind := r.str(); {
	case r.err != nil:
		return time.Time{}, fmt.Errorf("%w: settle: %v", ErrBadReply, r.err)
	case kind == "gone": // the scope's state had expired or was lost
		return time.Time{}, nil
	case kind != "ok":
		return time.Time{}, fmt.Errorf("%w: settle: result %q", ErrBadReply, kind)
	}
	s.notify.wake(k.scopeKey, 1)
	return h.now, nil
}

// settleOp returns the settlement of lease with final charges as an
// operation of a batch.
func (s *Store) settleOp(ctx context.Context, k *scopeKeys, lease capacity.Lease, final capacity.Charges) *op {
	delta := final.NonNegative().Sub(lease.Charges)
	delta[capacity.InFlight] = 0
	b1, b2 := s.knownBoundsMicros(k)
	attempt := int64(lease.Attempt)
	if lease.ID != capacity.LeaseID(lease.Call, lease.Attempt) || attempt < 1 {
		attempt = 0 // matches no lease
	}
	deltas := make([]any, len(delta))
	for d, c := range delta {
		deltas[d] = c
	}
	var reserved []any
	for d := capacity.Requests; d <= capacity.Tokens; d++ {
		reserved = append(reserved, lease.Charges[d])
	}
	fields := newLayoutWriter(settleLayout).
		put("day_boundary", b1).put("next_boundary", b2).put("attempt", attempt).put("delta", deltas...).
		put("class", int(lease.Class)).put("key", lease.Key).put("weight", lease.Weight).
		put("reserved", reserved...).put("granted_at", lease.GrantedAt.UnixMicro()).
		done()
	return &op{ctx: ctx, code: opSettle, call: lease.Call, fields: fields}
}

// Release implements capacity.Store. A Lease with an empty ID and a Call
// releases that call's ticket, refunding the booked capacity.
func (s *Store) Release(ctx context.Context, lease capacity.Lease) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := lease.Scope.Validate(); err != nil {
		return err
	}
	if s.fallback != nil && (lease.ID == "" || s.fallback.owns(lease)) {
		if err := s.fallback.release(ctx, lease); err != nil {
			return err
		}
		if lease.ID != "" {
			s.notify.wake(lease.Scope.Key(), 1)
			return nil
		}
	}
	if err := s.down("release"); err != nil {
		return err
	}
	return s.route(lease.Scope, func() error {
		return s.rec.release(ctx, lease)
	}, func() error {
		_, err := s.release(ctx, lease)
		return err
	})
}

// release releases lease in Redis and returns the store's time of the
// release. Concurrent releases on one scope go in one batch (batch.go),
// whose script retimes the booked tickets once (lua/ops.lua).
func (s *Store) release(ctx context.Context, lease capacity.Lease) (time.Time, error) {
	k := s.keysFor(lease.Scope)
	if s.scripts.release != nil { // scripts before 5.2
		b1, b2 := s.knownBounds(k)
		args := append(s.commonArgs(k, b1, b2, 2), lease.Call, lease.ID)
		_, h, err := s.run(ctx, "release", s.scripts.release, k, args)
		if err != nil {
			return time.Time{}, err
		}
		s.notify.wake(k.scopeKey, 1)
		return h.now, nil
	}
	r, h, err := s.do(k, s.releaseOp(ctx, k, lease))
	if err != nil {
		return time.Time{}, err
	}
	switch kind := r.str(); {
	case r.err != nil:
		return time.Time{}, fmt.Errorf("%w: release: %v", ErrBadReply, r.err)
	case kind != "ok" && kind != "gone":
		return time.Time{}, fmt.Errorf("%w: release: result %q", ErrBadReply, kind)
	}
	s.notify.wake(k.scopeKey, 1)
	return h.now, nil
}

// Renew implements capacity.Store.
func (s *Store) Renew(ctx context.Context, lease capacity.Lease, ttl time.Duration) (capacity.Lease, error) {
	if err := ctx.Err(); err != nil {
		return capacity.Lease{}, err
	}
	if ttl <= 0 {
		return capacity.Lease{}, fmt.Errorf("%w: ttl %v must be positive", capacity.ErrInvalidRequest, ttl)
	}
	if err := lease.Scope.Validate(); err != nil {
		return capacity.Lease{}, err
	}
	if s.fallback != nil && s.fallback.owns(lease) {
		return s.fallback.renew(ctx, lease, ttl)
	}
	if err := s.down("renew"); err != nil {
		return capacity.Lease{}, err
	}
	var out capacity.Lease
	err := s.route(lease.Scope, func() (err error) {
		out, err = s.rec.renew(ctx, lease, ttl)
		return err
	}, func() (err error) {
		out, err = s.renewScripts(ctx, lease, ttl)
		return err
	})
	return out, err
}

// renewScripts renews lease with the scripts.
func (s *Store) renewScripts(ctx context.Context, lease capacity.Lease, ttl time.Duration) (capacity.Lease, error) {
	k := s.keysFor(lease.Scope)
	b1, b2 := s.knownBounds(k)
	args := append(s.commonArgs(k, b1, b2, 3), lease.Call, lease.ID, ttl.Microseconds())
	r, h, err := s.run(ctx, "renew", s.scripts.renew, k, args)
	if err != nil {
		return capacity.Lease{}, err
	}
	if h.kind != "G" {
		return capacity.Lease{}, capacity.ErrLeaseNotFound
	}
	le := r.lease(lease.Scope, lease.Call)
	if r.err != nil {
		return capacity.Lease{}, r.err
	}
	return le, nil
}

// releaseOp returns the release of lease (its ticket, if its ID is empty)
// as an operation of a batch (scripts 5.2 and later).
func (s *Store) releaseOp(ctx context.Context, k *scopeKeys, lease capacity.Lease) *op {
	b1, b2 := s.knownBoundsMicros(k)
	fields := newLayoutWriter(releaseLayout).put("day_boundary", b1).put("next_boundary", b2).put("id", lease.ID).done()
	return &op{ctx: ctx, code: opRelease, call: lease.Call, fields: fields}
}

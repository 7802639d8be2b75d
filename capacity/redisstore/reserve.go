package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Reserve implements capacity.Store: the request is decided atomically over
// every dimension of the scope, in Redis time. A grant whose answer took
// half its lease's TTL or more to arrive (Redis stopped after deciding, a
// worker stalled) is given back, and Reserve fails with
// capacity.ErrStoreUnavailable: the lease may have run out, and its slot
// been granted again, before its call could start (staleGrant).
func (s *Store) Reserve(ctx context.Context, req capacity.Request) (capacity.Reservation, error) {
	start := time.Now()
	if err := ctx.Err(); err != nil {
		return capacity.Reservation{}, err
	}
	if err := validateRequest(req); err != nil {
		return capacity.Reservation{}, err
	}
	if err := s.down("reserve"); err != nil {
		return s.reserveFallback(ctx, req, err)
	}
	var res capacity.Reservation
	err := s.route(req.Scope, func() (err error) {
		res, err = s.rec.reserve(ctx, req)
		return err
	}, func() (err error) {
		k := s.keysFor(req.Scope)
		var room bool
		if res, room, err = s.reserve(ctx, k, req); err == nil && room {
			// Pass the wake-up on: a woken waiter was granted and there is more.
			s.notify.wake(k.scopeKey, 1)
		}
		return err
	})
	if err != nil {
		return s.reserveFallback(ctx, req, err)
	}
	if err := s.staleGrant(ctx, req, res, time.Since(start)); err != nil {
		return capacity.Reservation{}, err
	}
	return res, nil
}

// staleGrant gives back a grant whose answer took half its lease's TTL
// or more, and returns the error Reserve then returns (nil for any other
// answer). Deciding began after Reserve did, so a lease granted in less
// than half its TTL has at least half of it left; one that took longer may
// have none (TestChaos, RedisPause: Redis stopped between a pipeline's
// decisions and their replies, and a call went to the provider on a lease
// already reclaimed).
func (s *Store) staleGrant(ctx context.Context, req capacity.Request, res capacity.Reservation, took time.Duration) error {
	ttl := req.TTL
	if ttl <= 0 {
		ttl = capacity.DefaultLeaseTTL
	}
	if !res.Granted || took < ttl/2 {
		return nil
	}
	_ = s.Release(context.WithoutCancel(ctx), res.Lease) // gone already, or given back now
	return fmt.Errorf("redisstore: reserve: %w: the grant took %v to arrive, half its lease's %v or more", capacity.ErrStoreUnavailable, took.Round(time.Millisecond), ttl)
}

// reserve decides req in the scope's next batch. room reports that a grant
// left room for another call.
func (s *Store) reserve(ctx context.Context, k *scopeKeys, req capacity.Request) (capacity.Reservation, bool, error) {
	r, h, err := s.do(k, s.reserveOp(ctx, k, req))
	if err != nil {
		return capacity.Reservation{}, false, err
	}
	return parseReserve(r, h, req)
}

// reserveOp returns req as an operation of a batch (lua/ops.lua).
func (s *Store) reserveOp(ctx context.Context, k *scopeKeys, req capacity.Request) *op {
	sig := s.signatureOf(req.Limits)
	if v, ok := s.dayCache.Load(k.scopeKey); !ok || v.(capacity.DayBoundary) != req.Limits.DayReset {
		s.dayCache.Store(k.scopeKey, req.Limits.DayReset)
	}
	b1, b2 := s.bounds(k, req.Limits.DayReset)
	var deadline int64
	if !req.Deadline.IsZero() {
		deadline = req.Deadline.UnixMicro()
	}
	var since int64 // microseconds, rounded up: aging never lifts a call early
	if !req.Since.IsZero() {
		since = ceilMicros(req.Since)
	}
	charges := make([]any, len(req.Charges))
	for d, c := range req.Charges {
		charges[d] = c
	}
	rule := req.EffectiveRule(s.localNow())
	fields := newLayoutWriter(reserveLayout).
		put("day_boundary", b1).put("next_boundary", b2).put("attempt", req.Attempt).put("class", int(req.Class)).
		put("charges", charges...).
		put("ttl", leaseTTL(req).Microseconds()).put("deadline", deadline).put("book", boolArg(req.Book)).put("since", since).
		put("rank", rule.Rank).put("floor", rule.Floor).put("weight", req.FlowWeight(rule)).
		put("key", req.Fairness.Key).put("share", req.Fairness.Share).put("tokens_per_day", req.Fairness.TokensPerDay).
		put("fair_start", req.FairStart.Microseconds()).
		put("limits", sig). // last: a batch's reserves share it (batch.go)
		done()
	return &op{ctx: ctx, code: opReserve, call: req.Call, fields: fields, sig: sig, onAbandon: func(o *op) {
		// The caller gave up after its request was sent: give back a grant
		// or a booked ticket.
		res, _, err := parseReserve(o.res, o.h, req)
		switch {
		case err != nil:
		case res.Granted:
			_ = s.Release(context.WithoutCancel(ctx), res.Lease)
		case res.Booked:
			_ = s.Release(context.WithoutCancel(ctx), capacity.Lease{Scope: req.Scope, Call: req.Call})
		}
	}}
}

// parseReserve reads a reserve's result (see lua/ops.lua). room reports that
// a grant left room for another call.
func parseReserve(r *reply, h header, req capacity.Request) (capacity.Reservation, bool, error) {
	res := capacity.Reservation{Now: h.now}
	room := false
	switch kind := r.str(); kind {
	case "G":
		res.Granted = true
		room = r.int() == 1
		res.Probe = r.int() == 1
		res.Lease = r.lease(req.Scope, req.Call)
	case "d":
		res.Reason = capacity.DenyReason(r.int())
		res.Binding = capacity.Dimension(r.int())
		res.RetryAt = r.time()
		res.Booked = r.int() != 0
		if res.Reason == capacity.DenyBlocked {
			res.Block = r.block()
		}
	case "x":
		e := &capacity.DemandTooLargeError{Dimension: capacity.Dimension(r.int()), Charge: r.int(), Capacity: r.float()}
		if r.more() {
			e.Key = r.int() == 1 // scripts before 4.0 say nothing
		}
		if r.err != nil {
			return capacity.Reservation{}, false, r.err
		}
		return capacity.Reservation{}, false, e
	case "s":
		live := r.int()
		if r.err != nil {
			return capacity.Reservation{}, false, r.err
		}
		return capacity.Reservation{}, false, fmt.Errorf("%w: call has attempt %d live, asked for %d", capacity.ErrStaleAttempt, live, req.Attempt)
	default:
		if r.err == nil {
			return capacity.Reservation{}, false, fmt.Errorf("%w: reserve: result kind %q", ErrBadReply, kind)
		}
	}
	if r.err != nil {
		return capacity.Reservation{}, false, r.err
	}
	return res, room, nil
}

// block reads a block: reason, until, credential, detail, half-open,
// probing. No reason and no end is no block.
func (r *reply) block() capacity.Block {
	b := capacity.Block{Reason: capacity.BlockReason(r.int()), Until: r.time()}
	b.Credential = r.int() == 1
	b.Detail = r.str()
	b.HalfOpen = time.Duration(r.int()) * time.Microsecond
	b.Probing = r.int() == 1
	if b.Reason == 0 && b.Until.IsZero() {
		return capacity.Block{}
	}
	return b
}

// leaseTTL is how long req's lease lives, in whole microseconds as the
// script adds it to Redis time.
func leaseTTL(req capacity.Request) time.Duration {
	ttl := req.TTL
	if ttl <= 0 {
		ttl = capacity.DefaultLeaseTTL
	}
	return ttl.Truncate(time.Microsecond)
}

package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Reserve implements capacity.Store: one script decides the request
// atomically over every dimension of the scope, in Redis time.
func (s *Store) Reserve(ctx context.Context, req capacity.Request) (capacity.Reservation, error) {
	if err := ctx.Err(); err != nil {
		return capacity.Reservation{}, err
	}
	if err := validateRequest(req); err != nil {
		return capacity.Reservation{}, err
	}
	if err := s.down("reserve"); err != nil {
		return s.reserveFallback(ctx, req, err)
	}
	k := s.keysFor(req.Scope)
	res, room, err := s.reserve(ctx, k, req)
	if err != nil {
		return s.reserveFallback(ctx, req, err)
	}
	if room {
		// Pass the wake-up on: a woken waiter was granted and there is more.
		s.notify.wake(k.scopeKey, 1)
	}
	return res, nil
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

// reserveOp returns req as an operation of a batch.
func (s *Store) reserveOp(ctx context.Context, k *scopeKeys, req capacity.Request) *op {
	sig := s.signatureOf(req.Limits)
	if v, ok := s.dayCache.Load(k.scopeKey); !ok || v.(capacity.DayBoundary) != req.Limits.DayReset {
		s.dayCache.Store(k.scopeKey, req.Limits.DayReset)
	}
	b1, b2 := s.bounds(k, req.Limits.DayReset)
	ttl := leaseTTL(req)
	var deadline int64
	if !req.Deadline.IsZero() {
		deadline = req.Deadline.UnixMicro()
	}
	var since int64 // microseconds, rounded up: aging never lifts a call early
	if !req.Since.IsZero() {
		since = req.Since.UnixMicro()
		if req.Since.Nanosecond()%1000 != 0 {
			since++
		}
	}
	n := make(numbers, 0, 8*(7+capacity.NumDimensions))
	n = n.add(b1).add(b2).add(int64(req.Attempt)).add(int64(req.Class))
	for _, c := range req.Charges {
		n = n.add(c)
	}
	n = n.add(ttl.Microseconds()).add(deadline).addBool(req.Book).add(since)
	return &op{ctx: ctx, kind: "r", call: req.Call, nums: n, sig: sig, charges: req.Charges, onAbandon: func(o *op) {
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

// parseReserve reads a reserve's result (see lua/ops.lua).
func parseReserve(r *reply, h header, req capacity.Request) (capacity.Reservation, bool, error) {
	res := capacity.Reservation{Now: h.now}
	room := false
	kind := r.str()
	if len(kind) == 3 && kind[0] == 'g' {
		// A fresh grant: room and probe flags; the lease is the request's,
		// its mark the grant history the batch followed.
		if kind[1] > '1' || kind[1] < '0' || kind[2] > '1' || kind[2] < '0' || len(r.granted) != capacity.NumDimensions || h.now.IsZero() {
			return capacity.Reservation{}, false, fmt.Errorf("%w: reserve: malformed grant %q", ErrBadReply, kind)
		}
		res.Granted = true
		res.Probe = kind[2] == '1'
		res.Lease = capacity.Lease{
			ID: req.LeaseID(), Call: req.Call, Attempt: req.Attempt, Scope: req.Scope,
			Charges: req.Charges, Class: req.Class, GrantedAt: h.now, Expires: h.now.Add(leaseTTL(req)),
			Mark: capacity.Mark{Valid: true},
		}
		copy(res.Lease.Mark.Granted[:], r.granted)
		return res, kind[1] == '1', nil
	}
	switch kind {
	case "G": // a stored lease: a repeat or a claimed ticket
		res.Granted = true
		room = r.int() == 1
		res.Probe = r.int() == 1
		res.Lease = r.lease(req.Scope, req.Call)
	case "d":
		res.Reason = capacity.DenyReason(r.int())
		res.Binding = capacity.Dimension(r.int())
		res.RetryAt = r.time()
		res.Booked = r.int() != 0 // 2: booked now
		if res.Reason == capacity.DenyBlocked {
			res.Block = r.block()
		}
	case "x":
		e := &capacity.DemandTooLargeError{Dimension: capacity.Dimension(r.int()), Charge: r.int(), Capacity: r.float()}
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

// mark reads a lease's grant history (integers: sums of charges).
func (r *reply) mark() capacity.Mark {
	m := capacity.Mark{Valid: true}
	for d := range m.Granted {
		m.Granted[d] = float64(r.int())
	}
	return m
}

// lease reads a stored lease: attempt, class, granted at, expires, charges
// x7, grant history x7.
func (r *reply) lease(sc capacity.Scope, call string) capacity.Lease {
	le := capacity.Lease{Call: call, Scope: sc}
	le.Attempt = int(r.int())
	le.Class = capacity.Class(r.int())
	le.GrantedAt = r.time()
	le.Expires = r.time()
	for d := range le.Charges {
		le.Charges[d] = r.int()
	}
	le.Mark = r.mark()
	le.ID = capacity.LeaseID(call, le.Attempt)
	return le
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

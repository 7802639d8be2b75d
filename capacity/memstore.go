package capacity

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// epsilon absorbs floating-point error when a refilled level is compared with
// a charge, so a demand replayed at its computed RetryAt fits.
const epsilon = 1e-6

// MemoryOptions configures a MemoryStore.
type MemoryOptions struct {
	// Clock is the store's time source; the store reads only its Now. If
	// nil, SystemClock.
	Clock Clock
	// TicketGrace is how long a booked ticket waits past its time, or the
	// later time its call was told, for its call to come back before it
	// lapses (its capacity stays spent). If zero, DefaultLeaseTTL.
	TicketGrace time.Duration
}

// MemoryStore is a Store for one process. It is safe for concurrent use; each
// scope has its own lock, so scopes do not contend. Time comes from
// MemoryOptions.Clock, so tests drive it without sleeping.
type MemoryStore struct {
	clock Clock
	grace time.Duration

	mu     sync.RWMutex
	scopes map[Scope]*memScope
	creds  map[string]Block // credential-wide blocks by Scope.CredentialKey
	// credsChanged holds the credentials whose block changed, once a
	// scope tracks its records (memrecords.go). Guarded by mu.
	credsChanged changedKeys[string]

	learned memLearner // call sizes learned from what settles (Learner)
}

var (
	_ Store          = (*MemoryStore)(nil)
	_ Notifier       = (*MemoryStore)(nil)
	_ TicketNotifier = (*MemoryStore)(nil)
)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore(opts MemoryOptions) *MemoryStore {
	s := &MemoryStore{
		clock:   opts.Clock,
		grace:   opts.TicketGrace,
		scopes:  make(map[Scope]*memScope),
		creds:   make(map[string]Block),
		learned: memLearner{scopes: make(map[Scope]*memLearnScope)},
	}
	if s.clock == nil {
		s.clock = SystemClock{}
	}
	if s.grace <= 0 {
		s.grace = DefaultLeaseTTL
	}
	return s
}

func (s *MemoryStore) scope(sc Scope, create bool) *memScope {
	s.mu.RLock()
	st := s.scopes[sc]
	s.mu.RUnlock()
	if st != nil || !create {
		return st
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st = s.scopes[sc]; st == nil {
		st = newMemScope(sc, s.grace)
		s.scopes[sc] = st
	}
	return st
}

func (s *MemoryStore) credBlock(sc Scope, now time.Time) (Block, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.creds) == 0 {
		return Block{}, false
	}
	b, ok := s.creds[sc.CredentialKey()]
	if !ok || !b.Until.After(now) {
		return Block{}, false
	}
	return b, true
}

// Reserve implements Store.
func (s *MemoryStore) Reserve(ctx context.Context, req Request) (Reservation, error) {
	if err := ctx.Err(); err != nil {
		return Reservation{}, err
	}
	// A scope the store holds was validated when it was made: only the
	// rest of the request is (its secret scan costs as much as a decision).
	st := s.scope(req.Scope, false)
	validate := req.validateCall
	if st == nil {
		validate = req.Validate
	}
	if err := validate(); err != nil {
		return Reservation{}, err
	}
	if st == nil {
		st = s.scope(req.Scope, true)
	}
	now := s.clock.Now()
	cb, credBlocked := s.credBlock(req.Scope, now)

	st.mu.Lock()
	defer st.mu.Unlock()
	st.setLimits(req.Limits, now)
	st.advance(now)
	if st.retimePending && !st.windowCurrent {
		// A retime moved only the first tickets: those that came among
		// them since move now.
		st.retime(now)
	}

	// A demand that can never fit is refused, never queued.
	for d := range Dimension(NumDimensions) {
		if most := st.admissible[d]; most > 0 && float64(req.Charges[d]) > most {
			return Reservation{}, &DemandTooLargeError{Dimension: d, Charge: req.Charges[d], Capacity: most}
		}
	}
	if err := keyTooLarge(&req); err != nil {
		return Reservation{}, err
	}
	ttl := req.TTL
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}

	// Idempotency and attempt supersession.
	if le, ok := st.leases.get(req.Call); ok {
		switch {
		case le.Attempt == req.Attempt:
			return Reservation{Granted: true, Lease: le, Now: now}, nil
		case le.Attempt > req.Attempt:
			return Reservation{}, fmt.Errorf("%w: call has attempt %d live, asked for %d", ErrStaleAttempt, le.Attempt, req.Attempt)
		default:
			st.lapse(req.Call, now) // tokens stay spent
		}
	}

	if deny, ok := blockDenial(st, cb, credBlocked, now); ok {
		st.noteWaiter(deny)
		return deny, nil
	}
	// A half-open block that has run out lets exactly one call through.
	pc, probe := s.claimProbe(st, now)
	res, err := s.admit(st, &req, now, ttl)
	if probe {
		if res.Granted {
			res.Probe = true
		} else {
			s.undoProbe(st, pc)
		}
	}
	st.noteWaiter(res)
	return res, err
}

// blockDenial returns the denial of a blocked scope: the scope's block and
// its credential's (cb, when credBlocked); the later end binds. It requires
// st.mu.
func blockDenial(st *memScope, cb Block, credBlocked bool, now time.Time) (Reservation, bool) {
	b, ok := st.activeBlock(now)
	switch {
	case ok && !(credBlocked && cb.Until.After(b.Until)):
	case credBlocked:
		b = cb
	default:
		return Reservation{}, false
	}
	return Reservation{Now: now, Reason: DenyBlocked, Block: b, RetryAt: b.Until}, true
}

// probeClaim records what claimProbe changed, so that undo can restore it.
type probeClaim struct {
	scope, cred    bool
	prev, prevCred Block
	claimedCred    Block
	key            string
}

// claimProbe claims the probe of the scope's (and its credential's) due
// half-open blocks, holding others off for HalfOpen. It requires st.mu.
func (s *MemoryStore) claimProbe(st *memScope, now time.Time) (probeClaim, bool) {
	var pc probeClaim
	if b := st.block; b.HalfOpen > 0 && !b.Until.After(now) {
		pc.scope, pc.prev = true, b
		st.block.Until, st.block.Probing = now.Add(b.HalfOpen), true
	}
	s.mu.RLock()
	anyCred := len(s.creds) > 0
	s.mu.RUnlock()
	if anyCred {
		key := st.scope.CredentialKey()
		s.mu.Lock()
		if b, ok := s.creds[key]; ok && b.HalfOpen > 0 && !b.Until.After(now) {
			claimed := b
			claimed.Until, claimed.Probing = now.Add(b.HalfOpen), true
			s.creds[key] = claimed
			s.credsChanged.note(key)
			pc.cred, pc.prevCred, pc.claimedCred, pc.key = true, b, claimed, key
		}
		s.mu.Unlock()
	}
	return pc, pc.scope || pc.cred
}

// undoProbe gives a claimed probe back (its call was not granted). It
// requires st.mu.
func (s *MemoryStore) undoProbe(st *memScope, pc probeClaim) {
	if pc.scope {
		st.block = pc.prev
	}
	if pc.cred {
		s.mu.Lock()
		if cur, ok := s.creds[pc.key]; ok && cur == pc.claimedCred {
			s.creds[pc.key] = pc.prevCred
			s.credsChanged.note(pc.key)
		}
		s.mu.Unlock()
	}
}

// admit decides a request that no block stops. It requires st.mu.
func (s *MemoryStore) admit(st *memScope, req *Request, now time.Time, ttl time.Duration) (Reservation, error) {
	if tk, ok := st.tickets.get(req.Call); ok {
		return s.claimTicket(st, req, tk, now, ttl), nil
	}

	// The class's rule: its rank, and its floor, the part of every budget
	// it may not consume. The key's caps bind first.
	rule := req.EffectiveRule(now)
	if deny, ok := st.keyCapDenial(req, now); ok {
		return deny, nil
	}
	if deny, ok := st.dailyDenial(req, rule.Floor, now); ok {
		return deny, nil
	}

	wait, binding := st.bucketWait(req, rule.Rank, rule.Floor, now)
	if st.gathering(req, now) {
		// The first keyed calls on a scope at rest wait together.
		if w := time.UnixMicro(st.fairStartUntil).Sub(now); w > wait {
			wait = w
		}
		if binding < 0 {
			binding = st.gatherBinding(req.Charges)
		}
	}
	if binding < 0 && st.slotFree(rule.Floor) {
		borrowed := st.borrows(req.Charges)
		start, _, weight := st.place(req, rule, req.Charges)
		st.serve(req.Class, req.Fairness.Key, rule.Rank, start, req.Charges, now)
		st.chargeKey(req.Fairness, req.Charges, now)
		le := st.grantLease(req, req.Charges, true, weight, now, ttl)
		if borrowed {
			st.retime(now) // the lower ranks' tickets move back, in their order
		}
		return Reservation{Granted: true, Lease: le, Now: now}, nil
	}

	deny := Reservation{Now: now, Reason: DenyCapacity, RetryAt: now.Add(wait), Binding: binding}
	if binding < 0 {
		deny.Binding = InFlight
		deny.RetryAt = st.nextSlotAt(now)
	}
	if !req.Deadline.IsZero() && deny.RetryAt.After(req.Deadline) {
		deny.Reason = DenyDeadline
		return deny, nil
	}
	if req.Book && binding >= 0 && wait < MaxBlock {
		// Book the future capacity now (x/time/rate's Reserve): the bucket
		// goes negative, so later callers queue behind this one. A wait at
		// the bound is not booked: the call asks again then.
		at := deny.RetryAt
		start, finish, weight := st.place(req, rule, req.Charges)
		if st.soleFlow(req.Class, req.Fairness.Key) && finish < st.lastFinish[rule.Rank] {
			// Every ticket booked is its own flow's, whose refunds moved
			// the flow back (settleFlow): it goes after them, in the order
			// its flow booked, and no ticket moves.
			start, finish = st.lastFinish[rule.Rank], st.lastFinish[rule.Rank]+(finish-start)
		}
		// A ticket of its rank booked before it but finishing later, or
		// any ticket of a lower rank, is due after it.
		behind := finish < st.lastFinish[rule.Rank] || st.bookedBelow(rule.Rank)
		st.book(Ticket{Call: req.Call, Charges: req.Charges, At: at, Class: req.Class, Expires: at.Add(s.grace),
			Key: req.Fairness.Key, Rank: rule.Rank, Floor: rule.Floor, Weight: weight, Start: start, Finish: finish})
		st.chargeKey(req.Fairness, req.Charges, now)
		deny.Booked = true
		if behind {
			// Its place in the fair order is ahead of tickets booked
			// before it, which it pushes back: among the first tickets,
			// they follow at once (retime) and it may be due at once;
			// further back, none of the first moves. The others follow as
			// they come among the first (beyondFirst).
			if st.tickets.place(req.Call, tuning.RetimeWindow) < tuning.RetimeWindow {
				st.retime(now)
			} else {
				st.retimePending = true
			}
			tk, _ := st.tickets.get(req.Call)
			deny.RetryAt = tk.At
			if _, beyond := st.beyondFirst(req.Call); !beyond && !tk.At.After(now) && st.slotFree(rule.Floor) {
				return s.grantTicket(st, req, now, ttl), nil
			}
		}
	}
	return deny, nil
}

// grantTicket grants the call holding a due ticket its lease: the ticket's
// charges were taken when it was booked. It requires st.mu.
func (s *MemoryStore) grantTicket(st *memScope, req *Request, now time.Time, ttl time.Duration) Reservation {
	tk, _ := st.unbook(req.Call)
	st.serve(tk.Class, tk.Key, tk.Rank, tk.Start, tk.Charges, now)
	r := *req // the lease carries the ticket's class and key
	r.Class, r.Fairness.Key = tk.Class, tk.Key
	return Reservation{Granted: true, Lease: st.grantLease(&r, tk.Charges, false, tk.Weight, now, ttl), Now: now}
}

// claimTicket decides a call that holds ticket tk: it claims it at its time
// without competing again. It requires st.mu.
func (s *MemoryStore) claimTicket(st *memScope, req *Request, tk Ticket, now time.Time, ttl time.Duration) Reservation {
	end, beyond := st.beyondFirst(req.Call)
	if (beyond || now.Before(tk.At)) && st.takeOverdue(req.Call, now) {
		tk, _ = st.tickets.get(req.Call)
		end, beyond = st.beyondFirst(req.Call)
	}
	if beyond {
		// Further back than the first tickets, its time may be early: it
		// is due no earlier than the last of them, and is retimed (and its
		// call told if it moved well forward) as it comes among them.
		tk.told = tk.At
		if end.After(tk.told) {
			tk.told = end
		}
		st.tickets.put(tk)
		return Reservation{Now: now, Reason: DenyTicket, RetryAt: tk.told, Booked: true}
	}
	deny := Reservation{Now: now, Reason: DenyTicket, RetryAt: tk.At, Booked: true}
	if now.Before(tk.At) {
		tk.told = tk.At
		st.tickets.put(tk)
		return deny
	}
	floor := req.EffectiveRule(now).Floor
	if w := st.ticketShortfall(tk, floor); w > 0 {
		// A higher class borrowed this ticket's capacity: it moves later.
		tk.At, tk.Expires = now.Add(w), now.Add(w+s.grace)
		tk.told = tk.At
		st.tickets.put(tk)
		st.noteExpiry(tk.Expires)
		deny.RetryAt = tk.At
		return deny
	}
	if !st.slotFree(floor) {
		deny.Reason, deny.Binding, deny.RetryAt = DenyCapacity, InFlight, st.nextSlotAt(now)
		return deny
	}
	return s.grantTicket(st, req, now, ttl)
}

// Settle implements Store.
func (s *MemoryStore) Settle(ctx context.Context, lease Lease, final Charges) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st := s.scope(lease.Scope, false)
	if st == nil {
		return nil
	}
	now := s.clock.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.advance(now)
	delta := st.boundDebt(final.NonNegative().Sub(lease.Charges))
	delta[InFlight] = 0
	switch le, ok := st.leases.get(lease.Call); {
	case ok && le.ID == lease.ID:
		st.dropLease(lease.Call)
	case st.lapsed.take(lease.ID, now):
		// The lease expired or was superseded: its reservation stays
		// spent; only debt applies, once.
		delta = delta.NonNegative()
	default:
		return nil // settled or released already (once only), or unknown
	}
	moves := st.chargeMovesTickets(delta)
	st.charge(delta)
	st.dispatched(delta)
	st.settleFlow(lease, lease.Charges.Add(delta), now)
	if moves {
		st.retime(now)
	}
	st.release()
	return nil
}

// Release implements Store. A Lease with an empty ID and a Call releases that
// call's ticket, refunding the booked capacity.
func (s *MemoryStore) Release(ctx context.Context, lease Lease) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st := s.scope(lease.Scope, false)
	if st == nil {
		return nil
	}
	now := s.clock.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.advance(now)
	if lease.ID == "" {
		if tk, ok := st.unbook(lease.Call); ok {
			st.refund(tk.Charges)
			st.unplace(tk)
			st.refundKey(tk)
			st.retime(now)
			st.release()
		}
		return nil
	}
	if le, ok := st.leases.get(lease.Call); ok && le.ID == lease.ID {
		st.dropLease(lease.Call)
		st.refund(le.Charges)
		st.settleFlow(le, Charges{}, now)
		st.retime(now)
		st.release()
	}
	return nil
}

// Renew implements Store.
func (s *MemoryStore) Renew(ctx context.Context, lease Lease, ttl time.Duration) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, err
	}
	if ttl <= 0 {
		return Lease{}, fmt.Errorf("%w: ttl %v must be positive", ErrInvalidRequest, ttl)
	}
	st := s.scope(lease.Scope, false)
	if st == nil {
		return Lease{}, ErrLeaseNotFound
	}
	now := s.clock.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.advance(now)
	le, ok := st.leases.get(lease.Call)
	if !ok || le.ID != lease.ID {
		return Lease{}, ErrLeaseNotFound
	}
	le.Expires = now.Add(ttl)
	st.leases.update(lease.Call, le)
	st.noteExpiry(le.Expires)
	return le, nil
}

// Observe implements Store.
func (s *MemoryStore) Observe(ctx context.Context, sc Scope, obs Observation) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st := s.scope(sc, true)
	now := s.clock.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.advance(now)
	st.observe(obs, now)
	return nil
}

// Block implements Store.
func (s *MemoryStore) Block(ctx context.Context, sc Scope, b Block) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.Until.IsZero() {
		return fmt.Errorf("%w: block without Until", ErrInvalidRequest)
	}
	b.Until = boundBlock(b.Until, s.clock.Now())
	b.HalfOpen = min(max(b.HalfOpen, 0), MaxBlock)
	if b.Credential {
		key := sc.CredentialKey()
		s.mu.Lock()
		if cur, ok := s.creds[key]; !ok || b.Until.After(cur.Until) {
			s.creds[key] = b
			s.credsChanged.note(key)
		}
		s.mu.Unlock()
		return nil
	}
	st := s.scope(sc, true)
	now := s.clock.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	if !b.Until.After(st.block.Until) {
		return nil // an earlier block already holds longer
	}
	paused := st.block.Until.After(now)
	st.block = b
	if b.Reason == Cooldown && !paused {
		// One cut per pause: the 429s of calls sent before it began
		// arrive during it.
		st.advance(now)
		st.cooldown(b.Until.Sub(now), now)
	}
	return nil
}

// boundBlock returns until, or now + MaxBlock if that is sooner.
func boundBlock(until, now time.Time) time.Time {
	if limit := now.Add(MaxBlock); until.After(limit) {
		return limit
	}
	return until
}

// Unblock implements Store.
func (s *MemoryStore) Unblock(ctx context.Context, sc Scope, credential bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if credential {
		s.mu.Lock()
		delete(s.creds, sc.CredentialKey())
		s.credsChanged.note(sc.CredentialKey())
		s.mu.Unlock()
		return nil
	}
	if st := s.scope(sc, false); st != nil {
		st.mu.Lock()
		st.block = Block{}
		st.release() // the calls the block held back look again
		st.mu.Unlock()
	}
	return nil
}

// Snapshot implements Store.
func (s *MemoryStore) Snapshot(ctx context.Context, sc Scope) (Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return Snapshot{}, err
	}
	now := s.clock.Now()
	snap := s.snapshotOf(sc, now)
	st := s.scope(sc, false)
	if st == nil {
		return snap, nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.view(now).snapshot(snap, now), nil
}

// snapshotOf is the part of sc's Snapshot at now that is not the scope's
// state: the scope, the time and its credential's block.
func (s *MemoryStore) snapshotOf(sc Scope, now time.Time) Snapshot {
	snap := Snapshot{Scope: sc, Now: now}
	if cb, ok := s.credBlock(sc, now); ok {
		snap.Blocks = append(snap.Blocks, cb)
	}
	return snap
}

// AddFailure implements Store.
func (s *MemoryStore) AddFailure(ctx context.Context, sc Scope, call string, ttl time.Duration) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if call == "" || ttl <= 0 {
		return 0, fmt.Errorf("%w: AddFailure needs a call and a positive ttl", ErrInvalidRequest)
	}
	st := s.scope(sc, true)
	now := s.clock.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	f := st.failures[call]
	if !now.Before(f.expires) {
		f.count = 0
	}
	f.count++
	f.expires = now.Add(ttl)
	st.failures[call] = f
	st.failuresChanged.note(call)
	if len(st.failures) > 1024 && len(st.failures)%1024 == 0 {
		for c, g := range st.failures {
			if !now.Before(g.expires) {
				delete(st.failures, c)
				st.failuresChanged.note(c)
			}
		}
	}
	return f.count, nil
}

// Released implements Notifier.
func (s *MemoryStore) Released(sc Scope) (<-chan struct{}, func()) {
	st := s.scope(sc, true)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.notify == nil {
		st.notify = make(chan struct{})
	}
	return st.notify, func() {}
}

// TicketDue implements TicketNotifier.
func (s *MemoryStore) TicketDue(sc Scope, call string) (<-chan struct{}, func()) {
	st := s.scope(sc, true)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.due == nil {
		st.due = make(map[string]chan struct{})
	}
	ch, ok := st.due[call]
	if !ok {
		ch = make(chan struct{})
		st.due[call] = ch
	}
	return ch, func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.due[call] == ch {
			delete(st.due, call)
		}
	}
}

// Validate reports whether r can be reserved: a valid scope and limits, a
// call id, an attempt from 1, no negative charge or TTL.
func (r Request) Validate() error {
	if err := r.Scope.Validate(); err != nil {
		return err
	}
	return r.validateCall()
}

// validateCall is Validate without the scope.
func (r Request) validateCall() error {
	if r.Call == "" {
		return fmt.Errorf("%w: Call is empty", ErrInvalidRequest)
	}
	if r.Attempt < 1 {
		return fmt.Errorf("%w: Attempt is %d; want >= 1", ErrInvalidRequest, r.Attempt)
	}
	for d, c := range r.Charges {
		if c < 0 {
			return fmt.Errorf("%w: negative charge %d in %s", ErrInvalidRequest, c, Dimension(d))
		}
	}
	if r.TTL < 0 {
		return fmt.Errorf("%w: TTL is %v", ErrInvalidRequest, r.TTL)
	}
	if r.Rule != nil {
		if err := r.Rule.Validate(); err != nil {
			return err
		}
	}
	if err := r.Fairness.Validate(); err != nil {
		return err
	}
	if r.FairStart < 0 || r.FairStart > MaxFairStart {
		return fmt.Errorf("%w: FairStart is %v; want 0 to %v", ErrInvalidRequest, r.FairStart, MaxFairStart)
	}
	return r.Limits.Validate()
}

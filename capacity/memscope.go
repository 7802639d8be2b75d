package capacity

import (
	"maps"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// memScope is one scope's state in a MemoryStore. Every method requires mu.
type memScope struct {
	mu    sync.Mutex
	scope Scope
	scopeState

	leases  leaseSet     // live lease by Call
	recent  recentGrants // the leases granted within tuning.ReorderWindow: Mark.InFlight
	live    liveSums     // what the live leases hold by grant number, past liveFlat of them
	tickets ticketBook   // booked tickets by Call, in their order, by time and by expiry

	failures map[string]failureCount // real failures by Call
	// failuresChanged holds the calls whose failures changed (records.go).
	failuresChanged changedKeys[string]
	// lapsed holds the leases that expired or were superseded lately,
	// until they are forgotten: a late settle of one applies its debt once.
	lapsed lapsedLeases

	notify chan struct{} // closed and dropped on each settle/release, made by Released
	// due holds the channels of calls waiting for their tickets
	// (TicketDue), closed when retime brings a ticket due early.
	due map[string]chan struct{}

	grace time.Duration // MemoryOptions.TicketGrace: how long a due ticket waits for its call

	fairState // weighted fair queuing and key caps (memfair.go)

	// blobCopy is where TakeRecords copies the blob it encodes, and loaded
	// where LoadRecords decodes the records it applies (made at its first).
	blobCopy scopeBlob
	loaded   *scopeRecords
	blobSize int // of the blob TakeRecords last encoded
	// recordEnc encodes the changed records (namedChanges), its buffer kept
	// from one take to the next.
	recordEnc encoder
	// announced lists the calls whose tickets came forward since the
	// records were last taken (announceDue), while the scope tracks.
	announced []string
	// released is set when capacity came back since the records were last
	// taken (wake), while the scope tracks.
	released bool
}

// scopeState is the part of a scope's state held by value, so that a copy
// of a memScope (clone) shares none of it.
type scopeState struct {
	limits  Limits
	lowered [NumDimensions]int64 // provider-reported limits below the configured ones
	// loweredMark is the grant mark (Mark.Granted) of the latest report
	// that lowered each limit (0: none known), so that an older report of
	// a higher limit does not lift it (predates).
	loweredMark [NumDimensions]float64
	// loweredUntil is when the lowered limits are forgotten (zero: none
	// lowered): LoweredLimitMemory after the last report of one.
	loweredUntil time.Time
	budgets      [NumDimensions]Budget  // the effective budgets: configured, lowered where reported
	admissible   [NumDimensions]float64 // the configured limits' Admissible
	started      bool

	// level is each per-minute bucket's available level: what a new call may
	// take. Booked tickets are taken from it at booking (it may go negative,
	// as may debt) and held in booked until claimed; the bucket as the
	// provider sees it, level + booked, never exceeds capacity, so a claim at
	// the ticket's time always finds its charge there.
	level  [numBuckets]float64
	booked [numBuckets]float64
	// bookedBy splits booked by the rank of the tickets: a call may borrow
	// what lower ranks booked.
	bookedBy [MaxRank + 1][numBuckets]float64
	last     time.Time  // time the levels were last refilled
	dayUsed  [2]float64 // RequestsPerDay, TokensPerDay
	dayEnd   time.Time  // end of the current day window
	granted  [NumDimensions]float64
	grants   int64 // the leases granted: Mark.Seq of the latest
	inflight int64
	nextExp  time.Time // lower bound of the earliest lease or ticket expiry
	lastExp  time.Time // upper bound of every lease and ticket expiry
	// keysUntil is when every key's cap counters are at rest (share
	// buckets full, day windows over), for restsAt.
	keysUntil time.Time
	// waitersUntil is until when a call denied may come back on a
	// release (noteWaiter): a shared store announces releases until then.
	waitersUntil time.Time
	block        Block
	// cut is how much of its rate every per-minute bucket has lost to a
	// provider's 429s (cooldown): it refills at rate × (1 − cut), and cut
	// shrinks by RateRecovery a second.
	cut float64
	// retimePending says a retime moved only the first tickets, or a
	// booking placed ahead further back moved none: the others may be
	// later or earlier than the budget has them, are not claimed before
	// they are among the first (beyondFirst), and a Reserve retimes the
	// first again once a ticket left them (windowCurrent).
	retimePending bool
	// windowCurrent says the first tickets were retimed and none was
	// claimed, released or lapsed since: retiming them again would move
	// none of them.
	windowCurrent bool
	// bookedFlow is the flow of every booked ticket, unless flowsMixed
	// says that tickets of more than one flow were booked since the scope
	// last had none (soleFlow).
	bookedFlow flowID
	flowsMixed bool
	// bookedFloor is the highest class floor of the tickets booked since
	// the scope last had none (chargeMovesTickets).
	bookedFloor float64
}

func newMemScope(sc Scope, grace time.Duration) *memScope {
	return &memScope{
		scope: sc, leases: newLeaseSet(), tickets: newTicketBook(),
		failures: make(map[string]failureCount),
		grace:    grace,
	}
}

// clone returns a copy of m that shares nothing with it and wakes no one:
// Snapshot advances the copy, so that reading a scope never changes it. The
// lapsed leases stay behind: a snapshot settles none.
func (m *memScope) clone() *memScope {
	return &memScope{
		scope: m.scope, scopeState: m.scopeState,
		leases: m.leases.clone(), recent: m.recent.clone(), live: m.live.clone(), tickets: m.tickets.clone(),
		failures: map[string]failureCount{},
		grace:    m.grace,
		fairState: fairState{virtual: m.virtual, lastFinish: m.lastFinish, past: m.past, lastServed: m.lastServed,
			keyed: m.keyed, fairStartFrom: m.fairStartFrom, fairStartUntil: m.fairStartUntil,
			flows: maps.Clone(m.flows), flowOrder: slices.Clone(m.flowOrder), flowCursor: m.flowCursor, keys: maps.Clone(m.keys)},
	}
}

// view returns a copy of m advanced to now, its first tickets retimed as
// the next Reserve would: what a read sees, since reading a scope never
// changes it.
func (m *memScope) view(now time.Time) *memScope {
	v := m.clone()
	v.advance(now)
	if v.retimePending && !v.windowCurrent {
		v.retime(now)
	}
	return v
}

// lapse drops call's live lease (its slot comes back, its tokens stay
// spent) and remembers it as lapsed.
func (m *memScope) lapse(call string, now time.Time) {
	if le, ok := m.leases.get(call); ok {
		m.dropLease(call)
		m.lapsed.add(le.ID, now)
	}
}

// boundDebt bounds what a settle may charge beyond its reservation: no call
// uses more than the whole limit of a dimension, whatever its usage says.
func (m *memScope) boundDebt(delta Charges) Charges {
	for d := range delta {
		if lim := m.limits.Limit(Dimension(d)); lim > 0 && delta[d] > lim {
			delta[d] = lim
		}
	}
	return delta
}

type failureCount struct {
	count   int
	expires time.Time
}

// setLimits installs the request's limits. A new scope starts each bucket at
// its burst capacity; a changed limit keeps levels, clamped to the new
// capacity.
func (m *memScope) setLimits(l Limits, now time.Time) {
	if m.started && l == m.limits {
		return
	}
	first := !m.started
	m.started = true
	m.limits = l
	before := m.budgets
	m.recompute()
	if first {
		m.last = now
		for d := range numBuckets {
			m.level[d] = m.budgets[d].Capacity
		}
		m.dayEnd = l.DayReset.Next(now)
		return
	}
	m.clampLevels()
	for d := range numBuckets {
		if b, was := m.budgets[d], before[d]; was.Limited && (!b.Limited || b.Rate > was.Rate || b.Capacity > was.Capacity) {
			m.retime(now) // a larger budget brings tickets forward
			return
		}
	}
	m.retime(now)
}

// clampLevels keeps every bucket's level at or below its capacity, after the
// capacity changed.
func (m *memScope) clampLevels() {
	for d := range numBuckets {
		if m.budgets[d].Limited {
			m.level[d] = math.Min(m.level[d], m.budgets[d].Capacity)
		}
	}
}

// recompute derives the effective budgets from the limits and what the
// provider reported.
func (m *memScope) recompute() {
	l := m.limits
	for d := range NumDimensions {
		if lo := m.lowered[d]; lo > 0 && (l.Limit(Dimension(d)) == 0 || lo < l.Limit(Dimension(d))) {
			l = l.SetLimit(Dimension(d), lo)
		}
	}
	m.budgets = l.Budgets()
	m.admissible = m.limits.Admissible() // what a provider reports never lowers it
}

// advance refills the buckets to now, rolls the day window and reclaims
// expired leases and lapsed tickets. Time never runs backwards here.
func (m *memScope) advance(now time.Time) {
	if !m.started {
		return
	}
	if dt := now.Sub(m.last).Seconds(); dt > 0 {
		for d := range numBuckets {
			b := m.budgets[d]
			if top := b.Capacity - m.booked[d]; b.Limited && m.level[d] < top {
				m.level[d] = math.Min(top, m.level[d]+m.rate(d)*dt)
			}
		}
		m.cut = math.Max(0, m.cut-tuning.RateRecovery*dt)
		m.last = now
	}
	if !now.Before(m.dayEnd) {
		m.dayUsed = [2]float64{}
		m.dayEnd = m.limits.DayReset.Next(now)
	}
	if !m.loweredUntil.IsZero() && !now.Before(m.loweredUntil) {
		// Evidence, not law: a lowered limit not reported again is forgotten.
		m.lowered, m.loweredMark, m.loweredUntil = [NumDimensions]int64{}, [NumDimensions]float64{}, time.Time{}
		m.recompute() // tickets keep their times (later than needed) until the next retime
	}
	if !m.nextExp.IsZero() && !now.Before(m.nextExp) {
		m.reclaim(now)
	}
	m.forgetIdle()
}

// reclaim drops expired leases (their slots come back, their tokens stay
// spent), found by their expiry without reading the others, and lapsed
// tickets.
func (m *memScope) reclaim(now time.Time) {
	freed := false
	for {
		le, ok := m.leases.popExpired(now)
		if !ok {
			break
		}
		m.lapse(le.Call, now)
		freed = true
	}
	next := m.leases.nextExpiry()
	lapsed := m.tickets.lapsed(now)
	for _, tk := range lapsed {
		// Lapsed: its charge never reached the provider, so it goes back
		// (a due ticket's claim checks the provider's bucket, level +
		// booked, so no claim counted on it).
		m.unbook(tk.Call)
		m.refund(tk.Charges)
	}
	if t := m.tickets.nextExpiry(); !t.IsZero() && (next.IsZero() || t.Before(next)) {
		next = t
	}
	m.nextExp = next
	m.unplaceAll(lapsed)
	if freed {
		m.release()
	}
}

// expiredBy reports whether a live lease expired, or a booked ticket
// lapsed, at or before now: what advance would reclaim (nextExp is only a
// lower bound of it).
func (m *memScope) expiredBy(now time.Time) bool {
	for _, t := range []time.Time{m.leases.nextExpiry(), m.tickets.nextExpiry()} {
		if !t.IsZero() && !now.Before(t) {
			return true
		}
	}
	return false
}

func (m *memScope) noteExpiry(t time.Time) {
	if m.nextExp.IsZero() || t.Before(m.nextExp) {
		m.nextExp = t
	}
	if t.After(m.lastExp) {
		m.lastExp = t
	}
}

func (m *memScope) activeBlock(now time.Time) (Block, bool) {
	if m.block.Until.After(now) {
		return m.block, true
	}
	return Block{}, false
}

// slotFree reports whether a call whose class may not consume floor (a
// fraction) of the in-flight slots finds one free.
func (m *memScope) slotFree(floor float64) bool {
	b := m.budgets[InFlight]
	return !b.Limited || float64(m.inflight) < b.Capacity-math.Floor(floor*b.Capacity)
}

// nextSlotAt is the latest time a slot frees without any settle: the earliest
// live lease expiry (leaseSet.nextExpiry, not a walk of the leases).
func (m *memScope) nextSlotAt(now time.Time) time.Time {
	if t := m.leases.nextExpiry(); !t.IsZero() {
		return t
	}
	return now
}

// charge takes c from every budget (c may be negative: a refund, capped at
// capacity, or at the level a provider's report raised it to).
func (m *memScope) charge(c Charges) {
	for d := range numBuckets {
		if c[d] == 0 || !m.budgets[d].Limited {
			continue
		}
		top := math.Max(m.budgets[d].Capacity-m.booked[d], m.level[d])
		m.level[d] = math.Min(top, m.level[d]-float64(c[d]))
	}
	for i, d := range [...]Dimension{RequestsPerDay, TokensPerDay} {
		if m.budgets[d].Limited {
			m.dayUsed[i] = math.Max(0, m.dayUsed[i]+float64(c[d]))
		}
	}
}

// dispatched records c in the grant history (Mark): what went, or will go,
// to the provider — a lease granted (fresh or a claimed ticket) or a
// settle's debt; never a booking, which goes only when claimed.
func (m *memScope) dispatched(c Charges) {
	for d := range NumDimensions {
		if c[d] > 0 {
			m.granted[d] += float64(c[d])
		}
	}
}

// book takes a ticket's charges now and holds them until the ticket is
// claimed, lapses or is released.
func (m *memScope) book(tk Ticket) {
	if id := (flowID{tk.Class, tk.Key}); m.tickets.len() == 0 {
		m.bookedFlow, m.flowsMixed, m.bookedFloor = id, false, tk.Floor
	} else if id != m.bookedFlow {
		m.flowsMixed = true
	}
	m.bookedFloor = math.Max(m.bookedFloor, tk.Floor)
	m.charge(tk.Charges)
	for d := range numBuckets {
		m.booked[d] += float64(tk.Charges[d])
		m.bookedBy[tk.Rank][d] += float64(tk.Charges[d])
	}
	m.lastFinish[tk.Rank] = math.Max(m.lastFinish[tk.Rank], tk.Finish)
	tk.told = tk.At
	m.tickets.put(tk)
	m.noteExpiry(tk.Expires)
}

// unbook drops call's ticket (claimed, lapsed or released) and returns it.
func (m *memScope) unbook(call string) (Ticket, bool) {
	tk, ok := m.tickets.remove(call)
	if !ok {
		return Ticket{}, false
	}
	m.windowCurrent = false // a ticket from beyond the first may be among them now
	for d := range numBuckets {
		m.booked[d] = math.Max(0, m.booked[d]-float64(tk.Charges[d]))
		m.bookedBy[tk.Rank][d] = math.Max(0, m.bookedBy[tk.Rank][d]-float64(tk.Charges[d]))
	}
	if m.tickets.len() == 0 {
		m.lastFinish = [MaxRank + 1]float64{}
		m.bookedFlow, m.flowsMixed, m.bookedFloor = flowID{}, false, 0
	}
	return tk, true
}

// chargeMovesTickets reports whether charging delta (a settle's debt, or a
// refund where negative) can move a booked ticket: only where the bucket's
// level, before or after, is below the tickets' highest floor. A ticket is
// due once the provider's bucket (level + booked) holds its charge, those
// ahead of it and its floor; booked holds every ticket's charge, so a
// level at or above the floor holds them all there, and a change between
// two such levels moves no ticket. It is called before the charge.
func (m *memScope) chargeMovesTickets(delta Charges) bool {
	if m.tickets.len() == 0 {
		return false
	}
	for d := range numBuckets {
		b := m.budgets[d]
		if delta[d] == 0 || !b.Limited {
			continue
		}
		if lowest := math.Min(m.level[d], m.level[d]-float64(delta[d])); lowest < m.bookedFloor*b.Capacity {
			return true
		}
	}
	return false
}

// soleFlow reports whether every booked ticket is of flow (class, key):
// tickets are booked and none of another flow was booked since the scope
// last had none.
func (m *memScope) soleFlow(class Class, key string) bool {
	return m.tickets.len() > 0 && !m.flowsMixed && m.bookedFlow == flowID{class, key}
}

// dailyDenial returns the denial of a request that does not fit today's
// counters, leaving floor (a fraction) of them to higher classes: a spent
// day is not booked; it resets at its boundary. A large call may use a
// fresh day.
func (m *memScope) dailyDenial(req *Request, floor float64, now time.Time) (Reservation, bool) {
	for _, d := range [...]Dimension{RequestsPerDay, TokensPerDay} {
		b := m.budgets[d]
		allowance := math.Max(b.Capacity-math.Floor(floor*b.Capacity), float64(req.Charges[d]))
		if b.Limited && m.dayUsed[d-RequestsPerDay]+float64(req.Charges[d]) > allowance+epsilon {
			return Reservation{Now: now, Reason: DenyDailyQuota, Binding: d, RetryAt: m.dayEnd}, true
		}
	}
	return Reservation{}, false
}

// bucketWait returns how long req must wait for the per-minute buckets
// (the longest wait binds) and the binding dimension (-1: none).
func (m *memScope) bucketWait(req *Request, rank int, floor float64, now time.Time) (time.Duration, Dimension) {
	var wait time.Duration
	binding := Dimension(-1)
	for d := range numBuckets {
		c := float64(req.Charges[d])
		if !m.budgets[d].Limited || c == 0 {
			continue
		}
		// Waits compare to the microsecond (the Redis store's resolution),
		// so both stores name the same binding dimension.
		if w := m.fitWait(d, c, floor, m.borrowable(d, rank), now); w > 0 && (micros(w) > micros(wait) || binding < 0) {
			wait, binding = w, Dimension(d)
		}
	}
	return wait, binding
}

// fitWait returns how long until c fits in bucket d with no other traffic,
// leaving floor (a fraction of the bucket) untouched — or, for a charge
// larger than the rest of the bucket, until the bucket is full. While
// tickets hold part of the bucket, a charge larger than the rest waits at
// least until the last of them is due.
func (m *memScope) fitWait(d int, c, floor, borrow float64, now time.Time) time.Duration {
	b := m.budgets[d]
	need := math.Min(c+floor*b.Capacity, b.Capacity) - m.level[d] - borrow
	if need <= epsilon {
		return 0
	}
	w := waitFor(need, m.rate(d))
	if c > b.Capacity-(m.booked[d]-borrow)+epsilon {
		// The last ticket that charges d, among the latest
		// tuning.LastTicketScan; past them, the last looked at.
		read := 0
		m.tickets.latest(func(tk Ticket) bool {
			read++
			if tk.Charges[d] == 0 && read < tuning.LastTicketScan {
				return true
			}
			w = max(w, tk.At.Sub(now))
			return false
		})
	}
	return w
}

// waitFor is how long a bucket refilling at rate takes to gain need, rounded
// up to the nanosecond and at most MaxBlock: no number makes a wait overflow
// (or wrap around to a grant).
func waitFor(need, rate float64) time.Duration {
	ns := math.Ceil(need / rate * float64(time.Second))
	if !(ns < float64(MaxBlock)) { // NaN too
		return MaxBlock
	}
	return time.Duration(ns)
}

// borrowable is what a call of rank r may take, in bucket d, from the
// capacity that lower ranks booked: their tickets are late by as much.
func (m *memScope) borrowable(d int, r int) float64 {
	var sum float64
	for lower := range r {
		sum += m.bookedBy[lower][d]
	}
	return sum
}

// borrows reports whether a grant of c takes capacity that tickets
// booked: more than some bucket's level.
func (m *memScope) borrows(c Charges) bool {
	for d := range numBuckets {
		if m.budgets[d].Limited && m.booked[d] > 0 && float64(c[d]) > m.level[d]+epsilon {
			return true
		}
	}
	return false
}

// bookedBelow reports whether tickets of ranks below r hold capacity: a
// ticket of rank r booked now is due before them.
func (m *memScope) bookedBelow(r int) bool {
	for lower := range r {
		for d := range numBuckets {
			if m.bookedBy[lower][d] > 0 {
				return true
			}
		}
	}
	return false
}

// ticketShortfall is how long a due ticket must still wait because a
// higher class borrowed its capacity: the provider's bucket, level + booked,
// must hold its charges above its class's floor.
func (m *memScope) ticketShortfall(tk Ticket, floor float64) time.Duration {
	var w time.Duration
	for d := range numBuckets {
		b := m.budgets[d]
		if !b.Limited || tk.Charges[d] == 0 {
			continue // as fitWait: a floor binds only where the call charges
		}
		need := math.Min(float64(tk.Charges[d])+floor*b.Capacity, b.Capacity)
		if short := need - (m.level[d] + m.booked[d]); short > epsilon {
			w = max(w, waitFor(short, m.rate(d)))
		}
	}
	return w
}

func (m *memScope) refund(c Charges) {
	var neg Charges
	for d := range c {
		neg[d] = -c[d]
	}
	neg[InFlight] = 0
	m.charge(neg)
}

// grantLease makes the call's lease. A fresh grant charges c; a claimed
// ticket was charged when it was booked.
func (m *memScope) grantLease(req *Request, c Charges, fresh bool, weight float64, now time.Time, ttl time.Duration) Lease {
	if fresh {
		m.charge(c)
	}
	m.dispatched(c)
	le := Lease{
		ID: req.LeaseID(), Call: req.Call, Attempt: req.Attempt, Scope: req.Scope,
		Charges: c, Class: req.Class, Key: req.Fairness.Key, Weight: weight,
		GrantedAt: now, Expires: now.Add(ttl),
	}
	m.recent.expire(now.Add(-tuning.ReorderWindow), &m.leases)
	m.grants++
	le.Mark = Mark{Valid: true, Granted: m.granted, InFlight: m.recent.held, Seq: m.grants}
	if !m.live.on() && m.inflight >= liveFlat {
		m.live.start(&m.leases)
	}
	if m.live.on() {
		m.live.add(le, 1)
	}
	slot, gen := m.leases.put(req.Call, le)
	m.recent.add(le, slot, gen)
	m.lapsed.drop(le.ID)
	m.inflight++
	m.noteExpiry(le.Expires)
	return le
}

func (m *memScope) dropLease(call string) {
	if le, ok := m.leases.get(call); ok {
		m.recent.ended(le)
		m.leases.del(call)
		m.inflight--
		switch {
		case m.inflight == 0:
			m.live.stop()
		case m.live.on():
			m.live.add(le, -1)
		}
	}
}

// lowerLimits applies the limits of observation o: a reported limit below
// the configured one lowers it, to a tenth of it at the least
// (MinReportedFraction), and a report at or above it lifts an earlier
// lowering, unless it predates the report that lowered it. A lowering is
// forgotten LoweredLimitMemory after the last report of one. It reports
// whether the budgets changed.
func (m *memScope) lowerLimits(o Observation, now time.Time) bool {
	changed, reported, lowered := false, false, false
	for d := range numBuckets {
		od := o.Dims[d]
		if od.HasLimit && od.Limit > 0 {
			cfg := m.limits.Limit(Dimension(d))
			was := m.lowered[d]
			switch {
			case cfg == 0 || od.Limit < cfg:
				reported, m.lowered[d] = true, boundReported(od.Limit, cfg)
				if o.Mark.Valid {
					m.loweredMark[d] = math.Max(m.loweredMark[d], o.Mark.Granted[d])
				}
			case !m.predates(o, d):
				m.lowered[d], m.loweredMark[d] = 0, 0
			}
			changed = changed || m.lowered[d] != was
		}
		lowered = lowered || m.lowered[d] != 0
	}
	switch {
	case !lowered:
		m.loweredUntil = time.Time{}
	case reported:
		m.loweredUntil = now.Add(tuning.LoweredLimitMemory)
	}
	if changed {
		m.recompute()
		m.clampLevels()
	}
	return changed
}

// predates reports whether observation o is of a call granted before the
// one whose report lowered bucket d's limit: it tells of the provider
// before the limit fell (an answer rendered before the fall, read after
// the first report of it), so it neither lifts the lowering nor raises
// the level.
func (m *memScope) predates(o Observation, d int) bool {
	return m.lowered[d] != 0 && o.Mark.Valid && o.Mark.Granted[d] < m.loweredMark[d]
}

// boundReported is a reported limit below the configured limit cfg (0: none
// configured), raised to a tenth of cfg at the least: one garbled header
// cannot starve a scope.
func boundReported(reported, cfg int64) int64 {
	if least := int64(math.Ceil(float64(cfg) * tuning.MinReportedFraction)); reported < least {
		return least
	}
	return reported
}

// observe applies a provider report: lowered limits (lowerLimits), and the
// level of each reported bucket moves as far as the report proves. What
// the report counted of the calls granted after the observed one left is
// unknown: a provider that reports its bucket when it admits a call
// counted none of them, one that reports it when it answers counted those
// that reached it meanwhile. So the provider's bucket (level + booked) is
// at most the remaining (less, where the remaining does not count calls in
// flight, what the leases granted before it and still live hold), and at
// least that less everything granted since and what the calls granted
// before it held while in flight (those still live, and Mark.InFlight: sent
// late, they may have reached the provider after it, and been answered
// before the report is read). A bucket below that range is raised to its
// bottom, one above it is lowered to its top, one inside it is left as it
// is; the top at most the ceiling, the bottom at most raiseTo. It raises only
// where the report is of the configured budget (follows), does not predate
// a lowered limit (predates), and its remaining is above zero: providers
// report a bucket in debt (after a lowered limit, or output charged at the
// end of a call) as 0, which bounds it from above only. Booked tickets then follow the new levels (retime). Reset values
// are never used as rates.
func (m *memScope) observe(o Observation, now time.Time) {
	moved := m.lowerLimits(o, now)
	earlier, own := m.liveBefore(o.Mark)
	for d := range numBuckets {
		od := o.Dims[d]
		if !od.HasRemaining || !m.budgets[d].Limited {
			continue
		}
		// uncounted: what the provider surely had not counted; since: what
		// it may or may not have; before: calls granted before the observed
		// one (a lower Mark.Seq) and still in flight, which may have reached
		// the provider after it (another worker's, sent late).
		var uncounted, since, before float64
		switch {
		case !o.Mark.Valid:
			since = earlier[d] // unknown send time: any may have left after it
		case od.InFlightExcluded:
			// A remaining that excludes calls in flight; a later grant is
			// counted in since.
			since = math.Max(0, m.granted[d]-o.Mark.Granted[d])
			uncounted = earlier[d] + own[d]
		default:
			since = math.Max(0, m.granted[d]-o.Mark.Granted[d])
			before = earlier[d]
		}
		if o.Mark.Valid {
			// The calls in flight at its grant, answered since, are in
			// neither the live leases nor since.
			before = math.Max(before, o.Mark.InFlight[d]-uncounted)
		}
		top := float64(od.Remaining) - uncounted
		bucket := math.Min(m.level[d]+m.booked[d], math.Min(top, m.ceiling(d)))
		if m.follows(od, d) && !m.predates(o, d) && od.Remaining > 0 {
			bucket = math.Max(bucket, m.raiseTo(d, top-since-before))
		}
		// The provider's bucket holds what booked tickets will claim:
		// what a new call may take is the rest.
		level := bucket - m.booked[d]
		if math.Abs(level-m.level[d]) > tuning.RetimeMove*m.budgets[d].Capacity {
			// Tickets move only for a report that moves them more than a
			// trifle.
			moved = true
		}
		m.level[d] = level
	}
	if moved {
		m.retime(now)
	}
}

// liveBefore returns what the live leases granted before the call of mark
// hold (those of a lower Mark.Seq; every live lease for a mark that is not
// valid or has no grant number), and what that call's lease holds if it is
// live: from the live sums past liveFlat leases live, else from the leases.
func (m *memScope) liveBefore(mark Mark) (earlier, own [numBuckets]float64) {
	n := mark.Seq
	if !mark.Valid || n <= 0 || n > m.grants+1 {
		n = m.grants + 1
	}
	return m.live.before(n, &m.leases)
}

// follows reports whether bucket d's level may follow report od up: only
// when od is the remaining of a budget no larger than the configured limit.
// The remaining of a larger pool (a key whose quota the configuration
// splits between teams) only lowers the level.
func (m *memScope) follows(od DimensionObservation, d int) bool {
	cfg := m.limits.Limit(Dimension(d))
	return od.HasLimit && od.Limit > 0 && (cfg == 0 || od.Limit <= cfg)
}

// raiseTo is the most a report that proves the provider's bucket d holds
// proven may raise tollgate's: all of it up to the bucket's capacity,
// which the safety margin already keeps below the provider's limit, and
// beyond it what it proves less the margin's part of the capacity, (1 −
// SafetyMargin) × capacity (estimates that err low do not turn a whole
// bucket at rest into a 429), at most the ceiling. While a 429 has cut the
// rate (cooldown), it stops short by the cut's share of ReorderWindow's
// refill: what a client tollgate does not see adds from the report to the
// calls granted on it. Decision 0006, points 2 and 6.
func (m *memScope) raiseTo(d int, proven float64) float64 {
	c := m.budgets[d].Capacity
	proven -= m.cut * m.budgets[d].Rate * tuning.ReorderWindow.Seconds()
	return math.Min(math.Max(math.Min(proven, c), proven-(1-m.limits.margin())*c), m.ceiling(d))
}

// ceiling is the most a provider's report may raise bucket d to: its
// per-minute limit (as lowered by reports), or its capacity if larger. A
// provider whose bucket holds more than Limits.Burst's worth is used to
// the full; none is used beyond the configured limit.
func (m *memScope) ceiling(d int) float64 {
	lim := m.limits.Limit(Dimension(d))
	if lo := m.lowered[d]; lo > 0 && (lim == 0 || lo < lim) {
		lim = lo
	}
	return math.Max(m.budgets[d].Capacity, float64(lim))
}

// release notes that the scope's operations released capacity (for
// TakeRecords, while it tracks) and wakes its waiters.
func (m *memScope) release() {
	if m.tracking() {
		m.released = true
	}
	m.wake()
}

// wake tells waiters that capacity may have come back.
func (m *memScope) wake() {
	if m.notify != nil {
		close(m.notify)
		m.notify = nil
	}
}

func (m *memScope) snapshot(s Snapshot, now time.Time) Snapshot {
	s.Limits = m.limits
	s.Budget = m.budgets
	s.DayResetAt = m.dayEnd
	for d := range numBuckets {
		s.Level[d] = m.level[d]
	}
	s.Level[RequestsPerDay] = m.budgets[RequestsPerDay].Capacity - m.dayUsed[0]
	s.Level[TokensPerDay] = m.budgets[TokensPerDay].Capacity - m.dayUsed[1]
	s.Level[InFlight] = m.budgets[InFlight].Capacity - float64(m.inflight)
	for _, le := range m.leases.all() {
		s.Leases = append(s.Leases, le)
	}
	sort.Slice(s.Leases, func(i, j int) bool { return s.Leases[i].ID < s.Leases[j].ID })
	for _, tk := range m.tickets.all() {
		tk.told = time.Time{}
		s.Tickets = append(s.Tickets, tk)
	}
	sort.Slice(s.Tickets, func(i, j int) bool {
		if a, b := s.Tickets[i].At, s.Tickets[j].At; !a.Equal(b) {
			return a.Before(b)
		}
		return s.Tickets[i].Call < s.Tickets[j].Call
	})
	if b, ok := m.activeBlock(now); ok {
		s.Blocks = append(s.Blocks, b)
	}
	m.fairSnapshot(&s, now)
	return s
}

package capacity

import (
	"math"
	"sort"
	"time"

	"github.com/tollgate-dev/tollgate/internal/tuning"
)

// fairState is a scope's weighted fair queuing and key caps (memScope).
//
// Each (class, fairness key) flow has a virtual time, finish: the virtual
// finish of its last booked or granted call. A call of the flow starts at
// the later of finish and its rank's virtual time (virtual, the start of
// the call served last) and finishes cost / weight later; booked tickets
// of a rank are due in the order of their finish (retime). A flow that
// waited for nothing starts at virtual: it keeps no credit, and is served
// at the next capacity.
type fairState struct {
	virtual [MaxRank + 1]float64 // start of the call of each rank served last
	// past logs each rank's virtual time as it grew, a point every
	// VirtualLogStep at most, the last VirtualLogLength points: a call
	// placed after it was scheduled starts where the rank was then.
	past       [MaxRank + 1][]virtualPoint
	lastServed [MaxRank + 1]int64   // when each rank last served a call, µs
	lastFinish [MaxRank + 1]float64 // the latest finish booked in each rank while tickets wait
	flows      map[flowID]flowState
	// flowOrder lists the flows in the order they came (one forgotten
	// leaves the last in its place), and flowCursor is where
	// forgetIdleFlows looks next.
	flowOrder  []flowID
	flowCursor int
	keys       map[string]keyState // fairness keys with caps, by key

	// keyed is set by the first keyed call since the scope was at rest;
	// fairStartUntil (µs) ends the gathering it opened at fairStartFrom
	// (Request.FairStart).
	keyed                         bool
	fairStartFrom, fairStartUntil int64

	// The flows, places of flowOrder and keys changed (records.go).
	flowsChanged changedKeys[flowID]
	orderChanged changedKeys[int]
	keysChanged  changedKeys[string]
}

// setFlow makes f flow id's state.
func (m *memScope) setFlow(id flowID, f flowState) {
	m.flows[id] = f
	m.flowsChanged.note(id)
}

// setKey makes k key's counters, and moves keysUntil to when they are at
// rest, if later.
func (m *memScope) setKey(key string, k keyState) {
	m.keys[key] = k
	m.keysChanged.note(key)
	now := later(k.last, m.last) // the operation's time
	rest := now
	if k.dayUsed > 0 {
		rest = later(rest, k.dayEnd)
	}
	for d := range numBuckets {
		top, r := k.frac*m.budgets[d].Capacity, k.frac*m.rate(d)
		if k.share[d] < top && r > 0 {
			rest = later(rest, now.Add(waitFor(top-k.share[d], r)))
		}
	}
	m.keysUntil = later(m.keysUntil, rest)
}

// gathering reports whether req, a keyed call, arrives while the first
// keyed calls on the scope gather (Request.FairStart): it opens the
// gathering if it is the first since the scope was at rest, and a flow new
// to the gathering keeps it open FairStart more (MaxFairStart from its
// start at most), so backlogs that Temporal dispatches one after another
// all arrive before the first burst is shared.
func (m *memScope) gathering(req *Request, now time.Time) bool {
	if req.Fairness.Key == "" {
		return false
	}
	t, d := now.UnixMicro(), req.FairStart.Microseconds()
	if !m.keyed {
		m.keyed = true
		if d > 0 {
			m.fairStartFrom, m.fairStartUntil = t, t+d
		}
		return t < m.fairStartUntil
	}
	if _, seen := m.flows[flowID{req.Class, req.Fairness.Key}]; t < m.fairStartUntil && !seen && d > 0 {
		m.fairStartUntil = min(max(m.fairStartUntil, t+d), m.fairStartFrom+MaxFairStart.Microseconds())
	}
	return t < m.fairStartUntil
}

// gatherBinding is the dimension a gathering call waits on: the first
// limited bucket it charges (-1: none, so there is nothing to share).
func (m *memScope) gatherBinding(c Charges) Dimension {
	for d := range numBuckets {
		if m.budgets[d].Limited && c[d] > 0 {
			return Dimension(d)
		}
	}
	return -1
}

// gatherFloor is the earliest a keyed ticket is due while the first keyed
// calls gather: the gathering's end (zero: none).
func (m *memScope) gatherFloor(tk Ticket) time.Time {
	if tk.Key == "" || m.fairStartUntil == 0 {
		return time.Time{}
	}
	return time.UnixMicro(m.fairStartUntil)
}

// virtualPoint is a rank's virtual time v from time t, in microseconds of
// the store's clock (the Redis store's resolution, so both stores read the
// log alike).
type virtualPoint struct {
	t int64
	v float64
}

// flowState is one flow's fair-queuing state.
type flowState struct {
	class   Class
	key     string
	rank    int
	finish  float64
	granted float64
}

// keyState is the counters of a fairness key's caps.
type keyState struct {
	frac    float64             // Fairness.Share when last charged
	share   [numBuckets]float64 // the key's own buckets (Fairness.Share)
	last    time.Time           // when share was last refilled
	dayUsed float64             // tokens charged in the day window ending dayEnd
	dayEnd  time.Time
	// dayStart is when the day window was rolled: a lease granted before
	// it was charged to an earlier window, whose corrections are dropped.
	dayStart time.Time
}

// place gives a call of req's flow its virtual start and finish, and
// moves the flow's finish there. The call starts at the flow's finish or
// at its rank's virtual time when it was scheduled (Request.Since; now if
// unknown), whichever is later: a key that waited for nothing keeps no
// credit, and one whose calls were held before they reached the store
// (Temporal dispatched another tenant's first) is not charged for that.
func (m *memScope) place(req *Request, rule ClassRule, c Charges) (start, finish, weight float64) {
	if m.flows == nil {
		m.flows = make(map[flowID]flowState)
	}
	id := flowID{req.Class, req.Fairness.Key}
	f, seen := m.flows[id]
	if !seen {
		m.flowOrder = append(m.flowOrder, id)
		m.orderChanged.note(len(m.flowOrder) - 1)
	}
	f.class, f.key, f.rank = req.Class, req.Fairness.Key, rule.Rank
	weight = req.FlowWeight(rule)
	start = math.Max(f.finish, m.virtualAt(rule.Rank, req.Since))
	finish = start + fairCost(c)/weight
	f.finish = finish
	m.setFlow(id, f)
	m.forgetIdleFlows()
	return start, finish, weight
}

// serve records that a call of flow (class, key) starting at start was
// granted c: its rank's virtual time becomes start (start-time fair
// queuing: the virtual time is the start of the call served last, so a
// flow served ahead of its turn, as one that took a free bucket before the
// others arrived, does not carry the others' clock with it), the flow's
// granted tokens grow.
func (m *memScope) serve(class Class, key string, rank int, start float64, c Charges, now time.Time) {
	m.virtual[rank] = start
	m.logVirtual(rank, now)
	id := flowID{class, key}
	if f, ok := m.flows[id]; ok {
		f.granted += fairCost(c)
		m.setFlow(id, f)
	}
}

// logVirtual records rank's virtual time at now in its log, at most a
// point every VirtualLogStep.
func (m *memScope) logVirtual(rank int, now time.Time) {
	log, t := m.past[rank], now.UnixMicro()
	m.lastServed[rank] = t
	if n := len(log); n > 0 && t-log[n-1].t < tuning.VirtualLogStep.Microseconds() {
		return
	}
	if len(log) == tuning.VirtualLogLength {
		log = append(log[:0:0], log[1:]...)
	}
	m.past[rank] = append(log, virtualPoint{t: t, v: m.virtual[rank]})
}

// virtualAt is rank's virtual time as it was at t: the virtual time now
// for a zero t or one at or after the rank's last grant; else the latest
// logged point at or before t (up to a VirtualLogStep early), or the
// oldest point for a t before them all.
func (m *memScope) virtualAt(rank int, t time.Time) float64 {
	log := m.past[rank]
	at := micros(time.Duration(t.UnixNano())) // rounded up, as the Redis store reads Since
	if t.IsZero() || len(log) == 0 || at >= m.lastServed[rank] {
		return m.virtual[rank]
	}
	for i := len(log) - 1; i >= 0; i-- {
		if log[i].t <= at {
			return log[i].v
		}
	}
	return log[0].v
}

// unplace gives a booked ticket that was never served its place back: if
// it is its flow's last, the flow finishes where the ticket started.
func (m *memScope) unplace(tk Ticket) {
	id := flowID{tk.Class, tk.Key}
	if f, ok := m.flows[id]; ok && f.finish == tk.Finish {
		f.finish = tk.Start
		m.setFlow(id, f)
	}
}

// unplaceAll gives tickets that lapsed together their places back, the
// latest of a flow first (so the flow returns to where the earliest
// started), and their charges to their keys' caps.
func (m *memScope) unplaceAll(tks []Ticket) {
	sort.Slice(tks, func(i, j int) bool {
		if tks[i].Finish != tks[j].Finish {
			return tks[i].Finish > tks[j].Finish
		}
		return tks[i].Call < tks[j].Call
	})
	for _, tk := range tks {
		m.unplace(tk)
		m.refundKey(tk)
	}
}

// settleFlow charges lease's flow and key the difference between what the
// call cost (final) and what it was granted at.
func (m *memScope) settleFlow(le Lease, final Charges, now time.Time) {
	delta := fairCost(final.NonNegative()) - fairCost(le.Charges)
	id := flowID{le.Class, le.Key}
	if f, ok := m.flows[id]; ok && le.Weight > 0 {
		f.finish += delta / le.Weight
		f.granted = math.Max(0, f.granted+delta)
		m.setFlow(id, f)
	}
	if k, ok := m.keys[le.Key]; ok {
		day := keyTokens(final.NonNegative()) - keyTokens(le.Charges)
		if le.GrantedAt.Before(k.dayStart) {
			day = 0 // charged to an earlier day window: today's is not corrected
		}
		m.setKey(le.Key, m.chargeKeyState(k, final.NonNegative().Sub(le.Charges), day))
	}
}

// forgetIdleFlows, once a scope holds MaxIdleFlows flows, looks at the next
// ForgetFlowsScan flows of flowOrder, wrapping around, and drops those not
// ahead of their rank's virtual time: the flows stay bounded, and no
// placement reads them all. The Redis store scans its hash of flows the
// same way, in its own order (lua/rules.lua, forgetIdleFlows).
func (m *memScope) forgetIdleFlows() {
	if len(m.flows) < tuning.MaxIdleFlows {
		return
	}
	for range tuning.ForgetFlowsScan {
		if m.flowCursor >= len(m.flowOrder) {
			m.flowCursor = 0
		}
		id := m.flowOrder[m.flowCursor]
		if f := m.flows[id]; f.finish <= m.virtual[f.rank] {
			delete(m.flows, id)
			m.flowsChanged.note(id)
			last := len(m.flowOrder) - 1
			m.flowOrder[m.flowCursor] = m.flowOrder[last]
			m.orderChanged.note(m.flowCursor)
			m.orderChanged.note(last)
			m.flowOrder = m.flowOrder[:last]
		} else {
			m.flowCursor++
		}
	}
}

// forgetIdle starts fair queuing afresh when the scope is idle: nothing
// booked or in flight and every bucket full. No flow is then ahead of
// another (the Redis store's state may expire then). Key caps are kept.
func (m *memScope) forgetIdle() {
	if len(m.flows) == 0 && !m.keyed || m.tickets.len() > 0 || m.leases.len() > 0 {
		return
	}
	for d := range numBuckets {
		if m.budgets[d].Limited && m.level[d] < m.budgets[d].Capacity {
			return
		}
	}
	for id := range m.flows {
		m.flowsChanged.note(id)
	}
	for i := range m.flowOrder {
		m.orderChanged.note(i)
	}
	clear(m.flows) // kept for the next calls, as the logs' space below
	m.flowOrder, m.flowCursor = m.flowOrder[:0], 0
	m.virtual, m.lastFinish = [MaxRank + 1]float64{}, [MaxRank + 1]float64{}
	for r := range m.past {
		m.past[r] = m.past[r][:0]
	}
	m.lastServed = [MaxRank + 1]int64{}
	m.keyed, m.fairStartFrom, m.fairStartUntil = false, 0, 0
}

// keyTokens is what a charge costs a key's daily token cap.
func keyTokens(c Charges) float64 { return chargedTokens(c) }

// refreshKey refills key's share buckets to now and rolls its day window.
func (m *memScope) refreshKey(f Fairness, now time.Time) keyState {
	k, ok := m.keys[f.Key]
	if !ok {
		for d := range numBuckets {
			k.share[d] = f.Share * m.budgets[d].Capacity
		}
		k.last = now
	}
	if dt := now.Sub(k.last).Seconds(); dt > 0 {
		for d := range numBuckets {
			if top := f.Share * m.budgets[d].Capacity; k.share[d] < top {
				k.share[d] = math.Min(top, k.share[d]+f.Share*m.rate(d)*dt)
			}
		}
		k.last = now
	}
	if !now.Before(k.dayEnd) {
		k.dayUsed, k.dayEnd, k.dayStart = 0, m.dayEnd, now
	}
	return k
}

// keyTooLarge returns the error of a call larger than its key's daily
// cap: no day would admit it.
func keyTooLarge(req *Request) error {
	f := req.Fairness
	if tok := keyTokens(req.Charges); f.TokensPerDay > 0 && tok > float64(f.TokensPerDay) {
		return &DemandTooLargeError{Dimension: TokensPerDay, Charge: int64(tok), Capacity: float64(f.TokensPerDay), Key: true}
	}
	return nil
}

// keyCapDenial returns the denial of a request its key's caps stop: the
// day's tokens (Fairness.TokensPerDay), then the key's share of every
// per-minute bucket (Fairness.Share), where it waits without booking.
func (m *memScope) keyCapDenial(req *Request, now time.Time) (Reservation, bool) {
	f := req.Fairness
	if f.Share <= 0 && f.TokensPerDay <= 0 {
		return Reservation{}, false
	}
	k := m.refreshKey(f, now)
	if f.TokensPerDay > 0 && k.dayUsed+keyTokens(req.Charges) > float64(f.TokensPerDay)+epsilon {
		return Reservation{Now: now, Reason: DenyKeyQuota, Binding: TokensPerDay, RetryAt: k.dayEnd}, true
	}
	if f.Share > 0 {
		var wait time.Duration
		binding := Dimension(-1)
		for d := range numBuckets {
			b := m.budgets[d]
			c := float64(req.Charges[d])
			if !b.Limited || c == 0 {
				continue
			}
			need := math.Min(c, f.Share*b.Capacity) - k.share[d]
			if need <= epsilon {
				continue
			}
			if w := waitFor(need, f.Share*m.rate(d)); micros(w) > micros(wait) || binding < 0 {
				wait, binding = w, Dimension(d)
			}
		}
		if binding >= 0 {
			return Reservation{Now: now, Reason: DenyKeyCap, Binding: binding, RetryAt: now.Add(wait)}, true
		}
	}
	return Reservation{}, false
}

// chargeKey takes c from req's key caps (a grant or a booking).
func (m *memScope) chargeKey(f Fairness, c Charges, now time.Time) {
	if f.Share <= 0 && f.TokensPerDay <= 0 {
		return
	}
	if m.keys == nil {
		m.keys = make(map[string]keyState)
	}
	k := m.refreshKey(f, now)
	k.frac = f.Share
	m.setKey(f.Key, m.chargeKeyState(k, c, keyTokens(c)))
}

// chargeKeyState takes c from k's share buckets, if it has a share (a
// refund if negative: up to the share's capacity), and day tokens from its
// day counter. A correction's day is keyTokens(final) − keyTokens(reserved),
// never keyTokens of the difference: keyTokens is not additive.
func (m *memScope) chargeKeyState(k keyState, c Charges, day float64) keyState {
	for d := range numBuckets {
		if k.frac > 0 {
			top := math.Max(k.frac*m.budgets[d].Capacity, k.share[d])
			k.share[d] = math.Min(top, k.share[d]-float64(c[d]))
		}
	}
	k.dayUsed = math.Max(0, k.dayUsed+day)
	return k
}

// refundKey gives a booked ticket that was never served back to its key's
// caps.
func (m *memScope) refundKey(tk Ticket) {
	if k, ok := m.keys[tk.Key]; ok {
		m.setKey(tk.Key, m.chargeKeyState(k, Charges{}.Sub(tk.Charges), -keyTokens(tk.Charges)))
	}
}

// fairSnapshot fills the flows and keys of s, the keys' counters as of now
// (their share buckets refilled, their day window rolled). m is a copy.
func (m *memScope) fairSnapshot(s *Snapshot, now time.Time) {
	for _, f := range m.flows {
		s.Flows = append(s.Flows, Flow{Class: f.class, Key: f.key, Rank: f.rank,
			Finish: f.finish, Virtual: m.virtual[f.rank], Granted: f.granted})
	}
	sort.Slice(s.Flows, func(i, j int) bool {
		if a, b := s.Flows[i], s.Flows[j]; a.Class != b.Class {
			return a.Class < b.Class
		}
		return s.Flows[i].Key < s.Flows[j].Key
	})
	for key := range m.keys {
		k := m.refreshKey(Fairness{Key: key, Share: m.keys[key].frac}, now)
		u := KeyUsage{Key: key, DayUsed: k.dayUsed, DayEnd: k.dayEnd}
		for d := range numBuckets {
			u.ShareLevel[d] = k.share[d]
		}
		s.Keys = append(s.Keys, u)
	}
	sort.Slice(s.Keys, func(i, j int) bool { return s.Keys[i].Key < s.Keys[j].Key })
}

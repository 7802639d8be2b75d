package capacity

import (
	"cmp"
	"slices"
)

// A scope's state as records (decision 0008: every rule written once, the
// shared store deciding on a copy of a scope): what it holds by value
// (scopeBlob) and its records, each kind by its own key. A scope that
// tracks its changes (memScope.track) names the records its operations
// changed, so that a store keeping a scope's state elsewhere writes only
// those (namedChanges), and a copy of the scope that applies them (apply) holds
// the same records (records) as the scope that made them.

// scopeBlob is what a scope holds by value outside its records: written
// whole with every change.
type scopeBlob struct {
	scopeState

	virtual                       [MaxRank + 1]float64
	past                          [MaxRank + 1][]virtualPoint
	lastServed                    [MaxRank + 1]int64
	lastFinish                    [MaxRank + 1]float64
	flowCount, flowCursor         int // len(flowOrder), and where forgetIdleFlows looks next
	keyed                         bool
	fairStartFrom, fairStartUntil int64

	recentHeld   [NumDimensions]float64
	recentCutoff int64
	liveOn       bool
	liveFrom     int64
}

// recentRecord is an entry of the recent grants (by Mark.Seq): when its
// lease was granted and, while the lease lives, its call.
type recentRecord struct {
	grantedAt int64 // unix nanoseconds
	call      string
}

// scopeRecords is a scope's state as records: all of them (records), or
// those that operations changed, nil for one deleted (namedChanges,
// decoded).
type scopeRecords struct {
	blob      scopeBlob
	leases    map[string]*Lease // by call
	tickets   map[string]*Ticket
	failures  map[string]*failureCount
	lapsed    map[string]*int64 // by lease id: when it is forgotten (unix nanoseconds)
	flows     map[flowID]*flowState
	flowOrder map[int]*flowID
	keys      map[string]*keyState
	live      map[liveNode]*[numBuckets]float64
	recent    map[int64]*recentRecord // by Mark.Seq
}

// track makes m note the records its operations change from now on, and
// forget those it noted.
func (m *memScope) track() {
	m.leases.changed.reset()
	m.tickets.changed.reset()
	m.failuresChanged.reset()
	m.lapsed.changed.reset()
	m.flowsChanged.reset()
	m.orderChanged.reset()
	m.keysChanged.reset()
	m.live.changed.reset()
	m.recent.changed.reset()
}

// tracking reports whether m notes its changes.
func (m *memScope) tracking() bool { return m.leases.changed != nil }

// namedChanges returns the records changed since the last call (since
// track for the first), encoded by name, nil for one deleted, and forgets
// them.
func (m *memScope) namedChanges() map[string][]byte {
	out := map[string][]byte{}
	e := &m.recordEnc
	nameChanged(e, out, kindLease, m.leases.changed, m.leases.get, strKey, (*Lease).fields)
	nameChanged(e, out, kindTicket, m.tickets.changed, m.tickets.get, strKey, (*Ticket).fields)
	nameChanged(e, out, kindFailure, m.failuresChanged, mapGet(m.failures), strKey, (*failureCount).fields)
	nameChanged(e, out, kindLapsed, m.lapsed.changed, mapGet(m.lapsed.forget), strKey, int64Fields)
	nameChanged(e, out, kindFlow, m.flowsChanged, mapGet(m.flows), flowKey, (*flowState).fields)
	nameChanged(e, out, kindFlowOrder, m.orderChanged, m.flowAt, intKey, (*flowID).fields)
	nameChanged(e, out, kindKey, m.keysChanged, mapGet(m.keys), strKey, (*keyState).fields)
	nameChanged(e, out, kindLive, m.live.changed, mapGet(m.live.nodes), liveKey, liveFields)
	nameChanged(e, out, kindRecent, m.recent.changed, m.recentAt, int64Key, (*recentRecord).fields)
	return out
}

// records returns every record of m.
func (m *memScope) records() scopeRecords {
	r := scopeRecords{
		blob:      m.blob(),
		leases:    map[string]*Lease{},
		tickets:   map[string]*Ticket{},
		failures:  allRecords(m.failures),
		lapsed:    allRecords(m.lapsed.forget),
		flows:     allRecords(m.flows),
		flowOrder: map[int]*flowID{},
		keys:      allRecords(m.keys),
		live:      allRecords(m.live.nodes),
		recent:    map[int64]*recentRecord{},
	}
	for call, le := range m.leases.all() {
		r.leases[call] = &le
	}
	for _, tk := range m.tickets.all() {
		r.tickets[tk.Call] = &tk
	}
	for i, id := range m.flowOrder {
		r.flowOrder[i] = &id
	}
	for _, g := range m.recent.queue[m.recent.head:] {
		rec := m.recentRecord(g)
		r.recent[g.seq] = &rec
	}
	return r
}

// apply makes m hold records r: the records of another copy of the scope
// (records), or the changes another copy made to the same records as m
// holds (namedChanges). Applying notes no change of m's own, and forgets
// the changes m noted: take them (namedChanges) first.
func (m *memScope) apply(r scopeRecords) {
	if m.tracking() {
		defer m.track() // what m applies is not m's change to send
	}
	m.setBlob(r.blob)
	for call, le := range r.leases {
		switch old, ok := m.leases.get(call); {
		case le == nil:
			m.leases.del(call)
		case ok && old.Mark.Seq == le.Mark.Seq:
			m.leases.update(call, *le) // the same lease renewed: it keeps its recent entry
		default:
			slot, gen := m.leases.put(call, *le)
			m.relinkRecent(le.Mark.Seq, slot, gen)
		}
	}
	for call, tk := range r.tickets {
		if tk == nil {
			m.tickets.remove(call)
		} else {
			m.tickets.put(*tk)
		}
	}
	applyMap(&m.failures, r.failures)
	m.applyLapsed(r.lapsed)
	applyMap(&m.flows, r.flows)
	applyMap(&m.keys, r.keys)
	m.applyFlowOrder(r.flowOrder, r.blob.flowCount)
	m.applyLive(r.live, r.blob.liveOn)
	m.applyRecent(r.recent)
}

// blob returns what m holds by value.
func (m *memScope) blob() scopeBlob {
	b := scopeBlob{
		scopeState: m.scopeState,
		virtual:    m.virtual, lastServed: m.lastServed, lastFinish: m.lastFinish,
		flowCount: len(m.flowOrder), flowCursor: m.flowCursor,
		keyed: m.keyed, fairStartFrom: m.fairStartFrom, fairStartUntil: m.fairStartUntil,
		recentHeld: m.recent.held, recentCutoff: m.recent.cutoff,
		liveOn: m.live.on(), liveFrom: m.live.from,
	}
	for r, log := range m.past {
		if len(log) > 0 {
			b.past[r] = slices.Clone(log)
		}
	}
	return b
}

func (m *memScope) setBlob(b scopeBlob) {
	m.scopeState = b.scopeState
	m.virtual, m.lastServed, m.lastFinish = b.virtual, b.lastServed, b.lastFinish
	m.flowCursor = b.flowCursor
	m.keyed, m.fairStartFrom, m.fairStartUntil = b.keyed, b.fairStartFrom, b.fairStartUntil
	m.recent.held, m.recent.cutoff = b.recentHeld, b.recentCutoff
	m.live.from = b.liveFrom
	for r, log := range b.past {
		m.past[r] = append(m.past[r][:0], log...)
	}
}

// flowAt returns the flow in place i of flowOrder.
func (m *memScope) flowAt(i int) (flowID, bool) {
	if i < 0 || i >= len(m.flowOrder) {
		return flowID{}, false
	}
	return m.flowOrder[i], true
}

// recentAt returns the record of the recent grant numbered seq, if it is
// still in the window.
func (m *memScope) recentAt(seq int64) (recentRecord, bool) {
	q := m.recent.queue[m.recent.head:]
	i, ok := slices.BinarySearchFunc(q, seq, func(g recentGrant, seq int64) int { return cmp.Compare(g.seq, seq) })
	if !ok {
		return recentRecord{}, false
	}
	return m.recentRecord(q[i]), true
}

// relinkRecent makes the recent grant numbered seq, if it is in the
// window, name the lease in slot as generation gen: a lease a copy ended,
// then had back from the records, is the grant's lease again.
func (m *memScope) relinkRecent(seq int64, slot int32, gen uint32) {
	q := m.recent.queue[m.recent.head:]
	if i, ok := slices.BinarySearchFunc(q, seq, func(g recentGrant, seq int64) int { return cmp.Compare(g.seq, seq) }); ok {
		q[i].slot, q[i].gen = slot, gen
	}
}

func (m *memScope) recentRecord(g recentGrant) recentRecord {
	rec := recentRecord{grantedAt: g.grantedAt}
	if le, ok := m.leases.at(g.slot, g.gen); ok {
		rec.call = le.Call
	}
	return rec
}

func (m *memScope) applyLapsed(r map[string]*int64) {
	var puts []lapsedLease
	for id, forget := range r {
		if forget == nil {
			delete(m.lapsed.forget, id)
		} else {
			puts = append(puts, lapsedLease{id, *forget})
		}
	}
	// Remembered in the order they are forgotten, as they lapsed.
	slices.SortFunc(puts, func(a, b lapsedLease) int { return cmp.Or(cmp.Compare(a.forget, b.forget), cmp.Compare(a.id, b.id)) })
	for _, x := range puts {
		m.lapsed.remember(x.id, x.forget)
	}
}

func (m *memScope) applyFlowOrder(r map[int]*flowID, count int) {
	if count > len(m.flowOrder) {
		m.flowOrder = append(m.flowOrder, make([]flowID, count-len(m.flowOrder))...)
	}
	m.flowOrder = m.flowOrder[:count]
	for i, id := range r {
		if id != nil && i < count {
			m.flowOrder[i] = *id
		}
	}
}

func (m *memScope) applyLive(r map[liveNode]*[numBuckets]float64, on bool) {
	if !on {
		m.live.nodes = nil
		return
	}
	if m.live.nodes == nil {
		m.live.nodes = map[liveNode][numBuckets]float64{}
	}
	applyMap(&m.live.nodes, r)
}

// applyRecent files the recent grants r adds or changes and drops those
// it deletes, in the order of their numbers (the order they were granted
// in): a grant's lease is live while its call holds the lease of that
// number.
func (m *memScope) applyRecent(r map[int64]*recentRecord) {
	if len(r) == 0 {
		return
	}
	q := m.recent.queue[m.recent.head:]
	kept := make([]recentGrant, 0, len(q)+len(r))
	for _, g := range q {
		if _, changed := r[g.seq]; !changed {
			kept = append(kept, g)
		}
	}
	for seq, rec := range r {
		if rec == nil {
			continue
		}
		g := recentGrant{slot: -1, seq: seq, grantedAt: rec.grantedAt}
		if i, ok := m.leases.index[rec.call]; ok && rec.call != "" && m.leases.slab[i].Mark.Seq == seq {
			g.slot, g.gen = i, m.leases.gen[i]
		}
		kept = append(kept, g)
	}
	slices.SortFunc(kept, func(a, b recentGrant) int { return cmp.Compare(a.seq, b.seq) })
	m.recent.queue, m.recent.head = kept, 0
}

// allRecords returns every record of m.
func allRecords[K comparable, V any](m map[K]V) map[K]*V {
	out := make(map[K]*V, len(m))
	for k, v := range m {
		out[k] = &v
	}
	return out
}

func mapGet[K comparable, V any](m map[K]V) func(K) (V, bool) {
	return func(k K) (V, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// applyMap puts the records of r into *m and deletes those r has nil for.
func applyMap[K comparable, V any](m *map[K]V, r map[K]*V) {
	for k, v := range r {
		switch {
		case v == nil:
			delete(*m, k)
		case *m == nil:
			*m = map[K]V{k: *v}
		default:
			(*m)[k] = *v
		}
	}
}

package capacity

// ScopeRecords is a scope's state as records, for the tests of records.go.
type ScopeRecords = scopeRecords

// TrackRecords makes scope sc of s (created if new) note the records its
// operations change.
func TrackRecords(s *MemoryStore, sc Scope) {
	st := s.scope(sc, true)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.track()
}

// ChangedRecords returns the blob of scope sc of s and the records that
// operations on it changed since the last call, and forgets them: what
// TakeRecords gives, decoded.
func ChangedRecords(s *MemoryStore, sc Scope) ScopeRecords {
	r, err := parseRecords(sc, s.TakeRecords(sc))
	if err != nil {
		panic("TakeRecords gave records that do not decode: " + err.Error())
	}
	return r
}

// AllRecords returns every record of scope sc of s.
func AllRecords(s *MemoryStore, sc Scope) ScopeRecords {
	st := s.scope(sc, true)
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.records()
}

// ApplyRecords applies r to scope sc of s.
func ApplyRecords(s *MemoryStore, sc Scope, r ScopeRecords) {
	st := s.scope(sc, true)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.apply(r)
}

// MergeRecords applies changes ch to the records all, as a store keeping
// the records elsewhere does.
func MergeRecords(all *ScopeRecords, ch ScopeRecords) {
	all.blob = ch.blob
	mergeMap(all.leases, ch.leases)
	mergeMap(all.tickets, ch.tickets)
	mergeMap(all.failures, ch.failures)
	mergeMap(all.lapsed, ch.lapsed)
	mergeMap(all.flows, ch.flows)
	mergeMap(all.keys, ch.keys)
	mergeMap(all.live, ch.live)
	mergeMap(all.recent, ch.recent)
	mergeMap(all.flowOrder, ch.flowOrder)
	for i := range all.flowOrder {
		if i >= ch.blob.flowCount {
			delete(all.flowOrder, i)
		}
	}
	if !ch.blob.liveOn {
		clear(all.live)
	}
}

// RecordsAt returns the blob of all and its records under the keys that ch
// names, nil for those all lacks: what a store keeping the records
// elsewhere holds now for the records a refused decision changed.
func RecordsAt(all ScopeRecords, ch ScopeRecords) ScopeRecords {
	return ScopeRecords{
		blob:      all.blob,
		leases:    pick(all.leases, ch.leases),
		tickets:   pick(all.tickets, ch.tickets),
		failures:  pick(all.failures, ch.failures),
		lapsed:    pick(all.lapsed, ch.lapsed),
		flows:     pick(all.flows, ch.flows),
		flowOrder: pick(all.flowOrder, ch.flowOrder),
		keys:      pick(all.keys, ch.keys),
		live:      pick(all.live, ch.live),
		recent:    pick(all.recent, ch.recent),
	}
}

func mergeMap[K comparable, V any](all, ch map[K]*V) {
	for k, v := range ch {
		if v == nil {
			delete(all, k)
		} else {
			all[k] = v
		}
	}
}

func pick[K comparable, V any](all, keys map[K]*V) map[K]*V {
	out := make(map[K]*V, len(keys))
	for k := range keys {
		out[k] = all[k]
	}
	return out
}

// AsLoaded returns all as a copy that applied it holds it: an entry of the
// recent grants names its call only while the call holds the lease of its
// number.
func AsLoaded(all ScopeRecords) ScopeRecords {
	out := all
	out.recent = make(map[int64]*recentRecord, len(all.recent))
	for seq, rec := range all.recent {
		v := *rec
		if le := all.leases[v.call]; le == nil || le.Mark.Seq != seq {
			v.call = ""
		}
		out.recent[seq] = &v
	}
	return out
}

// Flows returns the number of flows in r.
func (r ScopeRecords) Flows() int { return len(r.flows) }

// ThroughCodec returns r encoded and decoded again, as a store keeping the
// records elsewhere reads them back.
func ThroughCodec(sc Scope, r ScopeRecords) (ScopeRecords, error) { return parseRecords(sc, r.named()) }

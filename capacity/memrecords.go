package capacity

import (
	"fmt"
	"time"
)

// A MemoryStore's scope kept elsewhere (decision 0008): a store
// shared by many processes decides each operation with a MemoryStore of its
// own, then writes the records the operation changed where the others read
// them, and applies the records the others changed before it decides.

// CredentialRecord is the name of the record that holds the block of a
// scope's credential (Block.Credential), among a scope's records: the
// block of every scope of the credential, which a shared store keeps apart
// from any one scope's.
const CredentialRecord = "c"

// TrackRecords makes s note, from now on, the records of scope sc (created
// if new) that operations change, for TakeRecords, and the block of its
// credential.
func (s *MemoryStore) TrackRecords(sc Scope) {
	s.mu.Lock()
	if s.credsChanged == nil {
		s.credsChanged = changedKeys[string]{}
	}
	s.mu.Unlock()
	st := s.scope(sc, true)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.track()
}

// TakeRecords returns the blob of scope sc and the records its operations
// changed since the last TakeRecords (since TrackRecords for the first),
// and forgets them. Of a scope not tracked it returns the blob alone.
func (s *MemoryStore) TakeRecords(sc Scope) Records {
	st := s.scope(sc, true)
	st.mu.Lock()
	defer st.mu.Unlock()
	var fields map[string][]byte
	var announced []string
	if st.tracking() {
		fields = st.namedChanges()
		announced, st.announced = st.announced, nil
	}
	released := st.released
	st.released = false
	key := sc.CredentialKey()
	var credRestsAt time.Time
	s.mu.Lock()
	if _, changed := s.credsChanged[key]; changed {
		if fields == nil {
			fields = map[string][]byte{}
		}
		fields[CredentialRecord] = s.credentialRecord(key)
		credRestsAt = s.creds[key].restsAt()
		delete(s.credsChanged, key)
	}
	s.mu.Unlock()
	// Encoded from the scope's own copy: a blob on the stack would escape.
	// Made at the size of the last, so that it is not grown four times.
	st.blobCopy = st.blob()
	blob := appendRecord(make([]byte, 0, st.blobSize), st.blobCopy.fields)
	st.blobSize = len(blob)
	return Records{Blob: blob, Fields: fields, Announced: announced,
		RestsAt: st.restsAt(st.last), WaitersUntil: st.waitersUntil, Released: released, CredentialRestsAt: credRestsAt}
}

// ScopeRecords returns every record of scope sc.
func (s *MemoryStore) ScopeRecords(sc Scope) Records {
	st := s.scope(sc, true)
	st.mu.Lock()
	defer st.mu.Unlock()
	r := st.records()
	out := r.named()
	out.RestsAt, out.WaitersUntil = st.restsAt(st.last), st.waitersUntil
	s.mu.Lock()
	if rec := s.credentialRecord(sc.CredentialKey()); rec != nil {
		out.Fields[CredentialRecord] = rec
	}
	s.mu.Unlock()
	return out
}

// LoadRecords applies r to scope sc (created if new): every record of
// another copy of the scope (ScopeRecords), or the records another copy
// changed since this one last loaded or took its records (TakeRecords); a
// nil Blob keeps the scope's.
// What it applies is not noted as s's change, and the changes s noted and
// did not take are forgotten: take them first. Calls waiting on the scope
// (Released, TicketDue) are woken to look again. A record that does not
// decode fails it with an error wrapping ErrBadRecord, and nothing is
// applied.
func (s *MemoryStore) LoadRecords(sc Scope, r Records) error {
	cred, hasCred := r.Fields[CredentialRecord]
	var block Block
	if hasCred && cred != nil {
		if err := decodeRecord(cred, block.fields); err != nil {
			return fmt.Errorf("the credential's block: %w", err)
		}
	}
	st := s.scope(sc, true)
	st.mu.Lock()
	defer st.mu.Unlock()
	if r.Blob == nil {
		st.blobCopy = st.blob()
		r.Blob = encodeRecord(st.blobCopy.fields)
	}
	if st.loaded == nil {
		st.loaded = new(scopeRecords)
	}
	recs := st.loaded
	if err := parseRecordsInto(sc, r, recs); err != nil {
		return err
	}
	if hasCred {
		key := sc.CredentialKey()
		s.mu.Lock()
		if cred == nil {
			delete(s.creds, key)
		} else {
			s.creds[key] = block
		}
		s.mu.Unlock()
	}
	st.apply(*recs)
	st.wake()
	for call := range recs.tickets {
		st.wakeDue(call)
	}
	*recs = scopeRecords{} // the scratch keeps none of the records it held
	return nil
}

// credentialRecord returns the encoded block of credential key, nil for
// none. It requires s.mu.
func (s *MemoryStore) credentialRecord(key string) []byte {
	b, ok := s.creds[key]
	if !ok {
		return nil
	}
	return encodeRecord(b.fields)
}

// Wake wakes the calls waiting here on scope sc for what another process
// announced: those waiting for a release (Released), if released, and
// those among calls waiting for their tickets (TicketDue). They look
// again; nothing of the scope changes.
func (s *MemoryStore) Wake(sc Scope, released bool, calls []string) {
	st := s.scope(sc, false)
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if released {
		st.wake()
	}
	for _, call := range calls {
		st.wakeDue(call)
	}
}

// noteWaiter notes, of a denial, until when its call may come back on a
// release rather than at its time: one that booked no ticket, or whose
// ticket waits for a slot (the scripts' notify_until).
func (m *memScope) noteWaiter(res Reservation) {
	if !res.Granted && (!res.Booked || res.Binding == InFlight) {
		m.waitersUntil = later(m.waitersUntil, res.RetryAt)
	}
}

package capacity

// A MemoryStore's scope kept elsewhere (decision 0007, shape (b)): a store
// shared by many processes decides each operation with a MemoryStore of its
// own, then writes the records the operation changed where the others read
// them, and applies the records the others changed before it decides.

// TrackRecords makes s note, from now on, the records of scope sc (created
// if new) that operations change, for TakeRecords.
func (s *MemoryStore) TrackRecords(sc Scope) {
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
	if st.tracking() {
		r := st.changes()
		fields = r.namedFields()
	}
	// Encoded from the scope's own copy: a blob on the stack would escape.
	st.blobCopy = st.blob()
	return Records{Blob: encodeRecord(st.blobCopy.fields), Fields: fields}
}

// ScopeRecords returns every record of scope sc.
func (s *MemoryStore) ScopeRecords(sc Scope) Records {
	st := s.scope(sc, true)
	st.mu.Lock()
	defer st.mu.Unlock()
	r := st.records()
	return r.named()
}

// LoadRecords applies r to scope sc (created if new): every record of
// another copy of the scope (ScopeRecords), or the records another copy
// changed since this one last loaded or took its records (TakeRecords).
// What it applies is not noted as s's change, and the changes s noted and
// did not take are forgotten: take them first. Calls waiting on the scope
// (Released, TicketDue) are woken to look again. A record that does not
// decode fails it with an error wrapping ErrBadRecord, and nothing is
// applied.
func (s *MemoryStore) LoadRecords(sc Scope, r Records) error {
	recs, err := parseRecords(sc, r)
	if err != nil {
		return err
	}
	st := s.scope(sc, true)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.apply(recs)
	st.wake()
	for call := range recs.tickets {
		st.announceDue(call)
	}
	return nil
}

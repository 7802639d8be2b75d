package capacity

import (
	"encoding/binary"
	"fmt"
	"time"
)

// Records is part of a scope's state as named, encoded records: what a
// store that keeps a MemoryStore's scope elsewhere writes and reads
// (MemoryStore.TakeRecords, LoadRecords). Blob holds what the scope keeps
// by value and goes with every change; Fields holds the records by name,
// a nil value for one deleted. Names and values are binary; neither holds
// a secret (calls, fairness keys and lease ids are names).
type Records struct {
	Blob   []byte
	Fields map[string][]byte
	// Announced lists the calls whose tickets the operations brought
	// forward (TakeRecords): a shared store tells the processes where
	// they may wait (MemoryStore.Wake). LoadRecords ignores it.
	Announced []string
	// RestsAt is when the scope's state stops mattering, as of its last
	// operation (TakeRecords, ScopeRecords): every bucket full, every
	// lease expired, the day and the blocks over. A shared store may let
	// the records expire then; a scope that starts afresh behaves the
	// same. LoadRecords ignores it.
	RestsAt time.Time
	// WaitersUntil is until when a call denied on the scope, in any
	// process, may come back on a release: a shared store announces the
	// leases that end until then, and need not after. LoadRecords
	// ignores it (the blob holds it).
	WaitersUntil time.Time
	// CredentialRestsAt is when the credential's block stops mattering,
	// if the operations changed it (Fields holds CredentialRecord): a
	// shared store may let it expire then. LoadRecords ignores it.
	CredentialRestsAt time.Time
	// Released reports that the operations released capacity (a lease
	// settled, released or expired, a ticket released or lapsed): where it
	// waits here, a call denied looks again (Notifier.Released), and a
	// shared store tells the other processes until WaitersUntil
	// (TakeRecords). LoadRecords ignores it.
	Released bool
}

// The first byte of a record's name is its kind; the rest is its key.
const (
	kindLease     = 'l' // + call
	kindTicket    = 't' // + call
	kindFailure   = 'f' // + call
	kindLapsed    = 'x' // + lease id
	kindFlow      = 'w' // + flow id (class, key)
	kindFlowOrder = 'o' // + place
	kindKey       = 'k' // + fairness key
	kindLive      = 'n' // + level, index
	kindRecent    = 'r' // + Mark.Seq
)

// named returns r encoded.
func (r *scopeRecords) named() Records {
	return Records{Blob: encodeRecord(r.blob.fields), Fields: r.namedFields()}
}

// namedFields returns r's records (not its blob) encoded, by name.
func (r *scopeRecords) namedFields() map[string][]byte {
	out := map[string][]byte{}
	nameAll(out, kindLease, r.leases, strKey, (*Lease).fields)
	nameAll(out, kindTicket, r.tickets, strKey, (*Ticket).fields)
	nameAll(out, kindFailure, r.failures, strKey, (*failureCount).fields)
	nameAll(out, kindLapsed, r.lapsed, strKey, int64Fields)
	nameAll(out, kindFlow, r.flows, flowKey, (*flowState).fields)
	nameAll(out, kindFlowOrder, r.flowOrder, intKey, (*flowID).fields)
	nameAll(out, kindKey, r.keys, strKey, (*keyState).fields)
	nameAll(out, kindLive, r.live, liveKey, liveFields)
	nameAll(out, kindRecent, r.recent, int64Key, (*recentRecord).fields)
	return out
}

// parseRecords decodes the named records of scope sc.
func parseRecords(sc Scope, in Records) (scopeRecords, error) {
	var r scopeRecords
	if err := parseRecordsInto(sc, in, &r); err != nil {
		return scopeRecords{}, err
	}
	return r, nil
}

// parseRecordsInto is parseRecords into r, which it zeroes first, so that
// a scope that loads records often reuses one (memScope.loaded): the blob
// alone is 1.7 kB. The credential's block (CredentialRecord) is not the
// scope's and is left out. On error r holds part of the records.
func parseRecordsInto(sc Scope, in Records, r *scopeRecords) error {
	*r = scopeRecords{}
	if err := decodeRecord(in.Blob, r.blob.fields); err != nil {
		return fmt.Errorf("the scope's blob: %w", err)
	}
	d := new(decoder)
	for name, value := range in.Fields {
		if name == "" {
			return fmt.Errorf("%w: a record without a name", ErrBadRecord)
		}
		if name == CredentialRecord {
			continue
		}
		var err error
		switch name[0] {
		case kindLease:
			err = parseOne(d, &r.leases, name, value, parseStr, (*Lease).fields)
		case kindTicket:
			err = parseOne(d, &r.tickets, name, value, parseStr, (*Ticket).fields)
		case kindFailure:
			err = parseOne(d, &r.failures, name, value, parseStr, (*failureCount).fields)
		case kindLapsed:
			err = parseOne(d, &r.lapsed, name, value, parseStr, int64Fields)
		case kindFlow:
			err = parseOne(d, &r.flows, name, value, parseFlow, (*flowState).fields)
		case kindFlowOrder:
			err = parseOne(d, &r.flowOrder, name, value, parseInt, (*flowID).fields)
		case kindKey:
			err = parseOne(d, &r.keys, name, value, parseStr, (*keyState).fields)
		case kindLive:
			err = parseOne(d, &r.live, name, value, parseLive, liveFields)
		case kindRecent:
			err = parseOne(d, &r.recent, name, value, parseInt64, (*recentRecord).fields)
		default:
			err = fmt.Errorf("%w: no record kind %q", ErrBadRecord, name[:1])
		}
		if err != nil {
			return fmt.Errorf("record %q: %w", name, err)
		}
	}
	for _, le := range r.leases {
		if le != nil {
			le.Scope = sc // a lease's record leaves out its scope's name
		}
	}
	return nil
}

func nameAll[K comparable, V any](out map[string][]byte, kind byte, r map[K]*V, key func(K) []byte, fields func(*V, fieldCodec)) {
	for k, v := range r {
		name := recordName(kind, key(k))
		if v == nil {
			out[name] = nil
		} else {
			out[name] = encodeRecord(func(c fieldCodec) { fields(v, c) })
		}
	}
}

// nameChanged adds to out, by name, the records of one kind whose keys
// changed holds, as get finds them (nil for one it does not find: deleted),
// encoded with e, and empties changed.
func nameChanged[K comparable, V any](e *encoder, out map[string][]byte, kind byte, changed changedKeys[K], get func(K) (V, bool), key func(K) []byte, fields func(*V, fieldCodec)) {
	if len(changed) == 0 {
		return
	}
	// One record at a time in v, encoded by one closure: a record each
	// would move to the heap once each.
	var v V
	encode := func(c fieldCodec) { fields(&v, c) }
	for k := range changed {
		name := recordName(kind, key(k))
		var ok bool
		if v, ok = get(k); ok {
			out[name] = e.record(encode)
		} else {
			out[name] = nil
		}
	}
	clear(changed)
}

// recordName is the name of the record of kind with key.
func recordName(kind byte, key []byte) string { return string(append([]byte{kind}, key...)) }

// parseOne decodes the record name, value into *r (made if nil), with d.
func parseOne[K comparable, V any](d *decoder, r *map[K]*V, name string, value []byte, key func([]byte) (K, bool), fields func(*V, fieldCodec)) error {
	k, ok := key([]byte(name[1:]))
	if !ok {
		return fmt.Errorf("%w: a name without a key", ErrBadRecord)
	}
	if *r == nil {
		*r = map[K]*V{}
	}
	if value == nil {
		(*r)[k] = nil
		return nil
	}
	v := new(V)
	if err := d.record(value, func(c fieldCodec) { fields(v, c) }); err != nil {
		return err
	}
	(*r)[k] = v
	return nil
}

func int64Fields(p *int64, c fieldCodec) { c.int(p) }

func liveFields(p *[numBuckets]float64, c fieldCodec) { floats(c, p[:]) }

func strKey(k string) []byte { return []byte(k) }

func parseStr(b []byte) (string, bool) { return string(b), true }

func intKey(k int) []byte { return binary.AppendVarint(nil, int64(k)) }

func int64Key(k int64) []byte { return binary.AppendVarint(nil, k) }

func parseInt64(b []byte) (int64, bool) {
	x, n := binary.Varint(b)
	return x, n > 0 && n == len(b)
}

func parseInt(b []byte) (int, bool) {
	x, ok := parseInt64(b)
	return int(x), ok && x >= 0 && x <= 1<<31
}

func flowKey(id flowID) []byte {
	e := &encoder{}
	id.fields(e)
	return e.buf
}

func parseFlow(b []byte) (flowID, bool) {
	var id flowID
	d := &decoder{buf: b}
	id.fields(d)
	return id, d.err == nil && len(d.buf) == 0
}

func liveKey(k liveNode) []byte {
	return binary.AppendVarint(binary.AppendVarint(nil, int64(k.level)), k.index)
}

func parseLive(b []byte) (liveNode, bool) {
	level, n := binary.Varint(b)
	if n <= 0 || level < 0 || level > liveLevels {
		return liveNode{}, false
	}
	index, m := binary.Varint(b[n:])
	return liveNode{int(level), index}, m > 0 && n+m == len(b)
}

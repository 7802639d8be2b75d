package redisstore

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// record is a stored lease or ticket as the scripts write it: one line of
// name=value pairs, a per-dimension field once per dimension as
// name.dimension (constants.go: leaseFields, ticketFields). A name this
// version does not know is ignored and a missing one reads as 0, so the
// format can grow. The one string field, the fairness key (fieldKey), is
// held apart.
type record struct {
	n   map[string]float64
	key string
}

// parseRecord reads a record line.
func parseRecord(line string) (record, error) {
	r := record{n: map[string]float64{}}
	for _, pair := range strings.Fields(line) {
		name, value, ok := strings.Cut(pair, "=")
		if !ok {
			return record{}, fmt.Errorf("%w: record field %q has no value", ErrBadReply, pair)
		}
		if name == fieldKey {
			r.key = value
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return record{}, fmt.Errorf("%w: record field %q: %v", ErrBadReply, name, err)
		}
		r.n[name] = v
	}
	return r, nil
}

// charges reads the per-dimension field name.
func (r record) charges(name string) capacity.Charges {
	var c capacity.Charges
	for _, d := range capacity.Dimensions() {
		c[d] = int64(r.n[name+"."+d.String()])
	}
	return c
}

// time reads a time field (unix microseconds; 0 is the zero time).
func (r record) time(name string) time.Time {
	us := int64(r.n[name])
	if us == 0 {
		return time.Time{}
	}
	return fromMicros(us)
}

// lease reads a stored lease of call on sc.
func (r record) lease(sc capacity.Scope, call string) capacity.Lease {
	le := capacity.Lease{
		Call: call, Scope: sc, Attempt: int(r.n[fieldAttempt]), Class: capacity.Class(r.n[fieldClass]),
		GrantedAt: r.time(fieldGrantedAt), Expires: r.time(fieldExpires), Charges: r.charges(fieldCharge),
		Mark: capacity.Mark{Valid: true}, Key: r.key, Weight: r.n[fieldWeight],
	}
	for _, d := range capacity.Dimensions() {
		le.Mark.Granted[d] = r.n[fieldMark+"."+d.String()]
		le.Mark.InFlight[d] = r.n[fieldInFlight+"."+d.String()]
	}
	le.Mark.Seq = int64(r.n[fieldSeq])
	le.ID = capacity.LeaseID(call, le.Attempt)
	return le
}

// ticket reads a stored ticket of call.
func (r record) ticket(call string) capacity.Ticket {
	return capacity.Ticket{
		Call: call, At: r.time(fieldAt), Expires: r.time(fieldExpires),
		Class: capacity.Class(r.n[fieldClass]), Charges: r.charges(fieldCharge),
		Key: r.key, Rank: int(r.n[fieldRank]), Floor: r.n[fieldFloor], Weight: r.n[fieldWeight],
		Start: r.n[fieldStart], Finish: r.n[fieldFinish],
	}
}

// lease reads a lease's record line from the reply.
func (r *reply) lease(sc capacity.Scope, call string) capacity.Lease {
	line := r.str()
	if r.err != nil {
		return capacity.Lease{}
	}
	rec, err := parseRecord(line)
	if err == nil && (rec.n[fieldAttempt] < 1 || rec.n[fieldExpires] <= 0) {
		err = fmt.Errorf("%w: lease %q without an attempt or an expiry", ErrBadReply, line)
	}
	if err != nil {
		r.err = fmt.Errorf("%s: lease: %w", r.op, err)
		return capacity.Lease{}
	}
	return rec.lease(sc, call)
}

// ticket reads a ticket's record line from the reply.
func (r *reply) ticket(call string) capacity.Ticket {
	line := r.str()
	if r.err != nil {
		return capacity.Ticket{}
	}
	rec, err := parseRecord(line)
	if err != nil {
		r.err = fmt.Errorf("%s: ticket: %w", r.op, err)
		return capacity.Ticket{}
	}
	return rec.ticket(call)
}

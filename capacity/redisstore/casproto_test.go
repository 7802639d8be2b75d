package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity"
)

// casProto is the prototype of the other shape decision 0007 weighed: the
// decision made in Go, Redis holding a versioned state that a short
// compare-and-set script applies. It is measured by BenchmarkHotScope and
// BenchmarkManyScopes (TOLLGATE_SCALE_STORE=cas) and is not a store: it
// knows the requests bucket, leases and booked tickets (no classes,
// fairness, in-flight slots, leases' expiry, observations or blocks), which
// is what those benchmarks use.
//
// Each process batches its pending operations as the Redis store does: one
// read script returns the state, its version, Redis TIME and the tickets
// and leases of the batch's calls; Go decides the batch in order; one
// write script applies the new state and the records it changed if the
// version is still the one read, else the batch is decided again.
type casProto struct {
	rdb    *redis.Client
	prefix string
	scopes sync.Map // capacity.Scope -> *casScope

	// Commits and Conflicts count the write scripts that applied and those
	// that found another version.
	Commits, Conflicts atomic.Int64
}

// casScope is one scope's keys and pending operations.
type casScope struct {
	keys []string // state (hash: v, s), tickets (hash), leases (hash)

	mu      sync.Mutex
	pending []*casOp
	running bool
}

type casOp struct {
	settle bool
	req    capacity.Request
	lease  capacity.Lease
	res    capacity.Reservation
	err    error
	done   chan struct{}
}

// casRead returns TIME, the version, the state, then each call's ticket
// and lease (” for none).
var casRead = redis.NewScript(`
local t = redis.call('TIME')
local st = redis.call('HMGET', KEYS[1], 'v', 's')
local out = {t[1], t[2], st[1] or '0', st[2] or ''}
for i = 1, #ARGV do
  out[#out + 1] = redis.call('HGET', KEYS[2], ARGV[i]) or ''
  out[#out + 1] = redis.call('HGET', KEYS[3], ARGV[i]) or ''
end
return out`)

// casWrite applies a decision if the state's version is still ARGV[1]:
// ARGV[2] is the new state; then records, each a key index (2: tickets, 3:
// leases), a field and a value (” deletes it).
var casWrite = redis.NewScript(`
if (redis.call('HGET', KEYS[1], 'v') or '0') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', tostring(tonumber(ARGV[1]) + 1), 's', ARGV[2])
for i = 3, #ARGV, 3 do
  local key, field, value = KEYS[tonumber(ARGV[i])], ARGV[i + 1], ARGV[i + 2]
  if value == '' then redis.call('HDEL', key, field) else redis.call('HSET', key, field, value) end
end
return 1`)

func newCASProto(rdb *redis.Client, prefix string) *casProto {
	return &casProto{rdb: rdb, prefix: prefix}
}

// scope returns sc's keys and queue.
func (p *casProto) scope(sc capacity.Scope) *casScope {
	if v, ok := p.scopes.Load(sc); ok {
		return v.(*casScope)
	}
	tag := "{" + p.prefix + ":cas:" + sc.Key() + "}"
	v, _ := p.scopes.LoadOrStore(sc, &casScope{keys: []string{tag + ":state", tag + ":tickets", tag + ":leases"}})
	return v.(*casScope)
}

var errCASNotInPrototype = errors.New("casproto: not in the prototype")

func (p *casProto) Reserve(ctx context.Context, req capacity.Request) (capacity.Reservation, error) {
	op := &casOp{req: req, done: make(chan struct{})}
	p.do(p.scope(req.Scope), op)
	return op.res, op.err
}

func (p *casProto) Settle(ctx context.Context, lease capacity.Lease, final capacity.Charges) error {
	op := &casOp{settle: true, lease: lease, done: make(chan struct{})}
	p.do(p.scope(lease.Scope), op)
	return op.err
}

func (p *casProto) Release(context.Context, capacity.Lease) error { return errCASNotInPrototype }
func (p *casProto) Renew(context.Context, capacity.Lease, time.Duration) (capacity.Lease, error) {
	return capacity.Lease{}, errCASNotInPrototype
}
func (p *casProto) Observe(context.Context, capacity.Scope, capacity.Observation) error {
	return errCASNotInPrototype
}
func (p *casProto) Block(context.Context, capacity.Scope, capacity.Block) error {
	return errCASNotInPrototype
}
func (p *casProto) Unblock(context.Context, capacity.Scope, bool) error { return errCASNotInPrototype }
func (p *casProto) Snapshot(context.Context, capacity.Scope) (capacity.Snapshot, error) {
	return capacity.Snapshot{}, errCASNotInPrototype
}
func (p *casProto) AddFailure(context.Context, capacity.Scope, string, time.Duration) (int, error) {
	return 0, errCASNotInPrototype
}

// Released and TicketDue never announce: a call waits for its ticket's time.
func (p *casProto) Released(capacity.Scope) (<-chan struct{}, func()) {
	return make(chan struct{}), func() {}
}
func (p *casProto) TicketDue(capacity.Scope, string) (<-chan struct{}, func()) {
	return make(chan struct{}), func() {}
}

// do queues op on sc and waits for the batch that decides it.
func (p *casProto) do(sc *casScope, op *casOp) {
	sc.mu.Lock()
	sc.pending = append(sc.pending, op)
	if !sc.running {
		sc.running = true
		go p.loop(sc)
	}
	sc.mu.Unlock()
	<-op.done
}

func (p *casProto) loop(sc *casScope) {
	for {
		sc.mu.Lock()
		if len(sc.pending) == 0 {
			sc.running = false
			sc.mu.Unlock()
			return
		}
		n := min(len(sc.pending), 64)
		batch := sc.pending[:n:n]
		sc.pending = append([]*casOp(nil), sc.pending[n:]...)
		sc.mu.Unlock()
		p.run(sc.keys, batch)
		for _, op := range batch {
			close(op.done)
		}
	}
}

// casState is the scope's state: the bucket's level, when it was last
// refilled (µs) and what tickets hold.
type casState struct {
	level, booked float64
	last          int64
	started       bool
}

func (s casState) encode() string {
	return strconv.FormatFloat(s.level, 'g', -1, 64) + " " + strconv.FormatFloat(s.booked, 'g', -1, 64) + " " + strconv.FormatInt(s.last, 10)
}

func decodeCASState(v string) casState {
	f := strings.Fields(v)
	if len(f) != 3 {
		return casState{}
	}
	level, _ := strconv.ParseFloat(f[0], 64)
	booked, _ := strconv.ParseFloat(f[1], 64)
	last, _ := strconv.ParseInt(f[2], 10, 64)
	return casState{level: level, booked: booked, last: last, started: true}
}

// run decides a batch until its write applies.
func (p *casProto) run(keys []string, batch []*casOp) {
	ctx := context.Background()
	calls := make([]any, len(batch))
	for i, op := range batch {
		calls[i] = op.call()
	}
	for {
		raw, err := casRead.Run(ctx, p.rdb, keys, calls...).StringSlice()
		if err != nil {
			for _, op := range batch {
				op.err = err
			}
			return
		}
		secs, _ := strconv.ParseInt(raw[0], 10, 64)
		usecs, _ := strconv.ParseInt(raw[1], 10, 64)
		now := secs*1e6 + usecs
		version, st := raw[2], decodeCASState(raw[3])
		writes := []any{version, ""}
		records := map[string][2]string{} // call -> ticket, lease as decided so far
		for i, op := range batch {
			if _, ok := records[op.call()]; !ok {
				records[op.call()] = [2]string{raw[4+2*i], raw[5+2*i]}
			}
		}
		changed := map[string]bool{}
		for _, op := range batch {
			rec := records[op.call()]
			st, rec = op.decide(st, rec, now)
			records[op.call()] = rec
			changed[op.call()] = true
		}
		writes[1] = st.encode()
		for c := range changed {
			writes = append(writes, 2, c, records[c][0], 3, c, records[c][1])
		}
		ok, err := casWrite.Run(ctx, p.rdb, keys, writes...).Int()
		if err != nil {
			for _, op := range batch {
				op.err = err
			}
			return
		}
		if ok == 1 {
			p.Commits.Add(1)
			return
		}
		p.Conflicts.Add(1)
	}
}

func (op *casOp) call() string {
	if op.settle {
		return op.lease.Call
	}
	return op.req.Call
}

// decide applies op to the state and the call's records (ticket "at
// charge", lease "attempt charge"), the rules of the memory store reduced
// to one bucket: refill, a repeat returns the lease, a due ticket is
// claimed, a charge that fits is granted, else a ticket is booked at the
// time the bucket holds it.
func (op *casOp) decide(st casState, rec [2]string, now int64) (casState, [2]string) {
	if op.settle {
		rec[1] = ""
		return st, rec
	}
	req := op.req
	b := req.Limits.Budgets()[capacity.Requests]
	rate, capa := b.Rate, b.Capacity
	c := float64(req.Charges[capacity.Requests])
	if !st.started {
		st = casState{level: capa, last: now, started: true}
	}
	if now > st.last {
		st.level = min(capa-st.booked, st.level+rate*float64(now-st.last)/1e6)
		st.last = now
	}
	nowT := time.UnixMicro(now)
	lease := func() capacity.Reservation {
		return capacity.Reservation{Granted: true, Now: nowT, Lease: capacity.Lease{
			ID: req.LeaseID(), Call: req.Call, Attempt: req.Attempt, Scope: req.Scope, Charges: req.Charges,
			GrantedAt: nowT, Expires: nowT.Add(capacity.DefaultLeaseTTL)}}
	}
	if rec[1] != "" {
		op.res = lease()
		return st, rec
	}
	if rec[0] != "" {
		var at int64
		var charge float64
		if _, err := fmt.Sscan(rec[0], &at, &charge); err != nil {
			op.err = fmt.Errorf("casproto: ticket %q: %w", rec[0], err)
			return st, rec
		}
		if now < at {
			op.res = capacity.Reservation{Reason: capacity.DenyTicket, RetryAt: time.UnixMicro(at), Booked: true, Now: nowT}
			return st, rec
		}
		st.booked = max(0, st.booked-charge)
		rec = [2]string{"", strconv.Itoa(req.Attempt) + " " + strconv.FormatFloat(charge, 'g', -1, 64)}
		op.res = lease()
		return st, rec
	}
	if st.level >= c {
		st.level -= c
		rec[1] = strconv.Itoa(req.Attempt) + " " + strconv.FormatFloat(c, 'g', -1, 64)
		op.res = lease()
		return st, rec
	}
	at := now + int64((c-st.level)/rate*1e6) + 1
	op.res = capacity.Reservation{Reason: capacity.DenyCapacity, Binding: capacity.Requests, RetryAt: time.UnixMicro(at), Now: nowT}
	if req.Book {
		st.level -= c
		st.booked += c
		rec[0] = strconv.FormatInt(at, 10) + " " + strconv.FormatFloat(c, 'g', -1, 64)
		op.res.Booked = true
	}
	return st, rec
}

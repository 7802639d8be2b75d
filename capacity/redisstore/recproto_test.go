package redisstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/redisstore"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// recProto is the prototype of shape (b) with every rule (decision 0008):
// each process decides with a MemoryStore of its own per scope, which it
// keeps as a copy of the scope's records in Redis. It is measured by
// BenchmarkManyScopes, BenchmarkHotScope and BenchmarkNeighbour
// (TOLLGATE_SCALE_STORE=records) and passes the contract suite; it is not
// yet a store (no options, learned reservations, ledger, Summary, Stats,
// typed errors for Redis gone; decision 0008, "What is left to build").
// A scope's keys live until its records stop mattering (Records.RestsAt).
//
// A batch of a process's operations on a scope is decided on the copy at
// the time the copy estimates Redis's to be (the last Redis TIME it read
// plus the time elapsed since, never before the scope's last write), and
// recExchange writes the records it changed if the scope's version is
// still the copy's. Else recExchange returns what the copy missed: Redis
// TIME, the blob and the records changed since (from the log of the last
// recLogLength writes), or every record, and the values of the records the
// batch changed; the copy applies them (MemoryStore.LoadRecords) and
// decides the batch again. A batch on a scope whose copy is current costs
// one script call; on one another process wrote to since, two.
type recProto struct {
	rdb    redis.UniversalClient
	prefix string
	clock  capacity.Clock // nil: Redis TIME
	scopes sync.Map       // capacity.Scope -> *recScope

	// Commits and Conflicts count the writes that applied and those that
	// found another version; Reloads the copies read whole.
	Commits, Conflicts, Reloads atomic.Int64

	// queue holds the exchanges waiting to be sent: the process sends them
	// together, as one pipeline, when the one in flight returns.
	queue    chan *recCall
	pipeOnce sync.Once

	// sub is the sharded subscription to the channels of the scopes whose
	// calls wait here (subscribed: channel -> *recScope).
	sub        *redis.PubSub
	subOnce    sync.Once
	subscribed sync.Map
}

// recCall is an exchange waiting in the queue, and its reply.
type recCall struct {
	keys []string
	args []any
	raw  []string
	err  error
	done chan struct{}
}

// recPipeMax is the most exchanges one pipeline sends.
const recPipeMax = 256

// send queues an exchange and waits for its reply.
func (p *recProto) send(ctx context.Context, keys []string, args []any) ([]string, error) {
	p.pipeOnce.Do(func() {
		p.queue = make(chan *recCall, 4096)
		go p.pipe()
	})
	c := &recCall{keys: keys, args: args, done: make(chan struct{})}
	p.queue <- c
	<-c.done
	return c.raw, c.err
}

// pipe sends the queued exchanges, as many as are waiting, in one
// pipeline at a time.
func (p *recProto) pipe() {
	ctx := context.Background()
	_ = recExchange.Load(ctx, p.rdb).Err()
	batch := make([]*recCall, 0, recPipeMax)
	cmds := make([]*redis.Cmd, 0, recPipeMax)
	for c := range p.queue {
		batch = append(batch[:0], c)
	fill:
		for len(batch) < recPipeMax {
			select {
			case c := <-p.queue:
				batch = append(batch, c)
			default:
				break fill
			}
		}
		pipe := p.rdb.Pipeline()
		cmds = cmds[:0]
		for _, c := range batch {
			cmds = append(cmds, recExchange.EvalSha(ctx, pipe, c.keys, c.args...))
		}
		_, _ = pipe.Exec(ctx)
		for i, c := range batch {
			c.raw, c.err = cmds[i].StringSlice()
			if c.err != nil && redis.HasErrorPrefix(c.err, "NOSCRIPT") {
				c.raw, c.err = recExchange.Run(ctx, p.rdb, c.keys, c.args...).StringSlice()
			}
			close(c.done)
		}
	}
}

// recLogLength is how many writes the log of a scope keeps.
const recLogLength = 16

// recBatchMax is the most operations one batch decides: with 10,000
// callers over 8 processes, batches of 64 queued behind one another
// (Reserve p99 55-66 ms after the first second; 256: 10-34 ms).
const recBatchMax = 256

// recFreshFor is how long after its last exchange a copy is taken to be
// current: a batch on a copy older than that reads what it missed first,
// rather than deciding on it and being refused.
const recFreshFor = 20 * time.Millisecond

// recReadAtOnce is the most records one script reads; a copy of a larger
// scope that is further behind than the log reads them recReadAtOnce at a
// time (reload).
const recReadAtOnce = 256

// recSlack is how long a scope's records live past when they stop
// mattering (Records.RestsAt), for the clocks' differences.
const recSlack = 5 * time.Second

// recCredTTL is how long the credential's block lives past its last
// write: the longest block, and a half-open one's memory.
const recCredTTL = capacity.MaxBlock + redisstore.HalfOpenMemory + recSlack

// recScope is one scope's copy, keys and pending operations.
type recScope struct {
	sc   capacity.Scope
	keys []string // records (hash: v, b, and the records by name), log (list)

	mu      sync.Mutex
	pending []*recOp
	running bool

	// Owned by the batch running.
	copy    *capacity.MemoryStore
	clock   *recClock
	version int64 // of the records the copy holds; -1: none
	// credVersion is the version of the credential's block it holds.
	credVersion int64
	// waitCopy is copy, for the waiters (guarded by mu).
	waitCopy *capacity.MemoryStore
	// blob is the scope's blob as the copy last read or wrote it: a batch
	// that leaves it so and changes no record writes nothing.
	blob  []byte
	wrote bool // the last exchange wrote
	// timeAt is Redis TIME (unix ns) as last read, at readAt; last is the
	// time of the scope's last write (unix ns).
	timeAt, last int64
	readAt       time.Time
	touched      time.Time // the copy's last exchange
}

type recOp struct {
	run  func(s *capacity.MemoryStore) error
	err  error
	done chan struct{}
}

// recClock is the copy's clock: Redis TIME as the batch read it. Its
// timers are the system's (the copy's operations start none).
type recClock struct {
	capacity.Clock
	now atomic.Int64
}

func (c *recClock) Now() time.Time { return time.Unix(0, c.now.Load()).UTC() }

// recExchange: KEYS records, log, the credential's block (hash: v, b),
// the scope's channel;
// ARGV[1] the version the copy holds (-1: none), ARGV[2] 'read', 'reload'
// (a read that always returns the blob) or the decision's time (unix ns), ARGV[3] the version of the credential's block
// the copy holds; then, to write, the blob, the log entry, the TTL of the
// scope's keys (ms), the notice to announce on the scope's channel (” for none), names
// and values (” deletes; the name capacity.CredentialRecord
// is the credential's block). It writes them and returns {'ok', the new
// version, the block's version} if both versions are the copy's; else it
// returns {'missed', TIME s, TIME µs, the version, the time of the last
// write (unix ns), the mode ('same'; 'log': the log's entries after the
// copy's version; 'all': every record, name and value; 'far': the copy is
// further behind than the log and the records are more than one script
// should read, recProto.reload reads them), the blob (” for a read of a
// current copy), the block's version
// and value (” for none), the number of entries or names and values that
// follow, then those, then the values of the names given (” for none)}.
var recExchange = redis.NewScript(`
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
local cv = tonumber(redis.call('HGET', KEYS[3], 'v') or '0')
local have = tonumber(ARGV[1])
local write = ARGV[2] ~= 'read' and ARGV[2] ~= 'reload'
if write and have == v and cv == tonumber(ARGV[3]) then
  local set, del = {'v', v + 1, 'b', ARGV[4], 't', ARGV[2]}, {}
  for i = 8, #ARGV, 2 do
    if ARGV[i] == '` + capacity.CredentialRecord + `' then
      cv = cv + 1
      redis.call('HSET', KEYS[3], 'v', cv)
      if ARGV[i + 1] == '' then redis.call('HDEL', KEYS[3], 'b') else redis.call('HSET', KEYS[3], 'b', ARGV[i + 1]) end
      redis.call('PEXPIRE', KEYS[3], ` + strconv.FormatInt(recCredTTL.Milliseconds(), 10) + `)
    elseif ARGV[i + 1] == '' then del[#del + 1] = ARGV[i]
    else set[#set + 1] = ARGV[i]; set[#set + 1] = ARGV[i + 1] end
  end
  redis.call('HSET', KEYS[1], unpack(set))
  if #del > 0 then redis.call('HDEL', KEYS[1], unpack(del)) end
  redis.call('RPUSH', KEYS[2], ARGV[5])
  redis.call('LTRIM', KEYS[2], -` + strconv.Itoa(recLogLength) + `, -1)
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
  if ARGV[7] ~= '' then redis.call('SPUBLISH', KEYS[4], ARGV[7]) end
  return {'ok', tostring(v + 1), tostring(cv)}
end
local t = redis.call('TIME')
local fields = {'b', 't'}
for i = 8, #ARGV, 2 do fields[#fields + 1] = ARGV[i] end
local got = redis.call('HMGET', KEYS[1], unpack(fields))
local mode, body = 'same', {}
if have == v then
elseif have >= 0 and have < v and v - have <= redis.call('LLEN', KEYS[2]) then
  mode, body = 'log', redis.call('LRANGE', KEYS[2], have - v, -1)
elseif redis.call('HLEN', KEYS[1]) > ` + strconv.Itoa(recReadAtOnce) + ` then
  mode = 'far'
else
  mode = 'all'
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    if all[i] ~= 'v' and all[i] ~= 'b' and all[i] ~= 't' then body[#body + 1] = all[i]; body[#body + 1] = all[i + 1] end
  end
end
local blob = got[1] or ''
if mode == 'same' and ARGV[2] == 'read' then blob = '' end -- current: nothing to apply
local out = {'missed', t[1], t[2], tostring(v), got[2] or '0', mode, blob, tostring(cv),
  redis.call('HGET', KEYS[3], 'b') or '', tostring(#body)}
for _, x in ipairs(body) do out[#out + 1] = x end
for i = 3, #got do out[#out + 1] = got[i] or '' end
return out`)

func newRecProto(rdb redis.UniversalClient, prefix string) *recProto {
	return &recProto{rdb: rdb, prefix: prefix}
}

func (p *recProto) scope(sc capacity.Scope) *recScope {
	if v, ok := p.scopes.Load(sc); ok {
		return v.(*recScope)
	}
	tag := "{" + p.prefix + ":rec:" + sc.CredentialKey() + "}"
	s := &recScope{sc: sc, keys: []string{tag + ":records:" + sc.Key(), tag + ":log:" + sc.Key(), tag + ":cred", tag + ":n:" + sc.Key()}, version: -1}
	v, _ := p.scopes.LoadOrStore(sc, s)
	return v.(*recScope)
}

// do queues op on sc and waits for the batch that decides it: the first
// caller to find no batch running runs the batches, its own first, until
// none is pending.
func (p *recProto) do(sc capacity.Scope, run func(s *capacity.MemoryStore) error) error {
	if err := sc.Validate(); err != nil {
		return err // before its names make keys
	}
	s := p.scope(sc)
	op := &recOp{run: run, done: make(chan struct{})}
	s.mu.Lock()
	s.pending = append(s.pending, op)
	lead := !s.running
	s.running = true
	s.mu.Unlock()
	if lead {
		p.lead(s)
	}
	<-op.done
	return op.err
}

// lead runs s's pending batches until none is left.
func (p *recProto) lead(s *recScope) {
	for {
		s.mu.Lock()
		if len(s.pending) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		n := min(len(s.pending), recBatchMax)
		batch := s.pending[:n:n]
		s.pending = append([]*recOp(nil), s.pending[n:]...)
		s.mu.Unlock()
		if err := p.run(s, batch); err != nil {
			for _, op := range batch {
				op.err = err
			}
		}
		for _, op := range batch {
			close(op.done)
		}
	}
}

// run decides batch until its write applies.
func (p *recProto) run(s *recScope, batch []*recOp) error {
	ctx := context.Background()
	if s.copy == nil || time.Since(s.touched) > recFreshFor {
		// Likely stale: read what the copy missed before deciding.
		if err := p.exchange(ctx, s, []any{s.version, "read", s.credVersion}); err != nil {
			return err
		}
	}
	for range 100 {
		now := s.now()
		if p.clock != nil {
			now = p.clock.Now().UnixNano()
		}
		s.clock.now.Store(now)
		for _, op := range batch {
			op.err = op.run(s.copy)
		}
		ch := s.copy.TakeRecords(s.sc)
		if len(ch.Fields) == 0 && len(ch.Announced) == 0 && bytes.Equal(ch.Blob, s.blob) {
			// A read (Snapshot, Summary): nothing to write, if the copy
			// was current; else decide again on what it missed.
			version, cred := s.version, s.credVersion
			if err := p.exchange(ctx, s, []any{s.version, "read", s.credVersion}); err != nil {
				return err
			}
			if s.version == version && s.credVersion == cred {
				return nil
			}
			continue
		}
		ttl := max(ch.RestsAt.Sub(time.Unix(0, now)), 0) + recSlack
		args := []any{s.version, now, s.credVersion, ch.Blob, recEntry(ch.Fields), ttl.Milliseconds(), recNotice(ch, time.Unix(0, now))}
		for name, value := range ch.Fields {
			args = append(args, name, value)
		}
		if err := p.exchange(ctx, s, args); err != nil {
			return err
		}
		if s.wrote {
			s.last, s.touched, s.blob = max(s.last, now), time.Now(), ch.Blob
			p.Commits.Add(1)
			return nil
		}
		p.Conflicts.Add(1)
	}
	return errors.New("recproto: 100 conflicts in a row")
}

// now is the copy's estimate of Redis's time (unix ns): the last TIME
// read plus the time elapsed since, never before the scope's last write.
func (s *recScope) now() int64 {
	return max(s.timeAt+time.Since(s.readAt).Nanoseconds(), s.last)
}

// exchange runs recExchange with args and applies its reply: the new
// version, or what the copy missed (args names the records it changed,
// whose values it reads back).
func (p *recProto) exchange(ctx context.Context, s *recScope, args []any) error {
	raw, err := p.send(ctx, s.keys, args)
	if err != nil {
		return err
	}
	if s.wrote = raw[0] == "ok"; s.wrote {
		s.version, _ = strconv.ParseInt(raw[1], 10, 64)
		s.credVersion, _ = strconv.ParseInt(raw[2], 10, 64)
		return nil
	}
	m := parseMissed(raw)
	s.timeAt, s.readAt, s.last = m.time, time.Now(), m.last
	s.touched = s.readAt
	if m.mode == "far" {
		return p.reload(ctx, s, m.version)
	}
	if s.copy != nil && m.mode == "same" && m.blob == "" { // a read of a current copy
		if m.credVersion == s.credVersion {
			return nil
		}
		s.credVersion = m.credVersion
		return s.copy.LoadRecords(s.sc, capacity.Records{Fields: map[string][]byte{capacity.CredentialRecord: m.cred}})
	}
	if s.copy == nil || m.mode == "all" || m.blob == "" {
		// A copy afresh: the first, one past the log, or of a scope never
		// written (what a refused batch changed is dropped with the old).
		p.freshCopy(s)
	}
	s.version, s.credVersion = m.version, m.credVersion
	recs := capacity.Records{Fields: map[string][]byte{capacity.CredentialRecord: m.cred}}
	if m.blob != "" {
		recs.Blob = []byte(m.blob)
		s.blob = recs.Blob
	}
	if m.mode == "log" {
		for _, e := range m.body {
			if err := recParseEntry(e, recs.Fields); err != nil {
				return err
			}
		}
	} else if m.mode == "all" {
		for i := 0; i+1 < len(m.body); i += 2 {
			recs.Fields[m.body[i]] = []byte(m.body[i+1])
		}
	}
	for i := 7; i+1 < len(args); i += 2 { // names and values, after seven arguments
		if name := args[i].(string); name != capacity.CredentialRecord {
			if v := m.asked[(i-7)/2]; v == "" {
				recs.Fields[name] = nil
			} else {
				recs.Fields[name] = []byte(v)
			}
		}
	}
	return s.copy.LoadRecords(s.sc, recs)
}

// freshCopy gives s an empty copy of its scope.
func (p *recProto) freshCopy(s *recScope) {
	s.clock = &recClock{Clock: capacity.SystemClock{}}
	s.copy = capacity.NewMemoryStore(capacity.MemoryOptions{Clock: s.clock})
	s.copy.TrackRecords(s.sc)
	s.mu.Lock()
	s.waitCopy = s.copy
	s.mu.Unlock()
	p.Reloads.Add(1)
}

// recMissed is recExchange's reply to a copy that missed writes.
type recMissed struct {
	time, version, last, credVersion int64 // Redis TIME and the last write's time in unix ns
	mode, blob                       string
	cred                             []byte // the credential's block; nil: none
	body, asked                      []string
}

func parseMissed(raw []string) recMissed {
	secs, _ := strconv.ParseInt(raw[1], 10, 64)
	usecs, _ := strconv.ParseInt(raw[2], 10, 64)
	m := recMissed{time: secs*1e9 + usecs*1e3, mode: raw[5], blob: raw[6]}
	m.version, _ = strconv.ParseInt(raw[3], 10, 64)
	m.last, _ = strconv.ParseInt(raw[4], 10, 64)
	m.credVersion, _ = strconv.ParseInt(raw[7], 10, 64)
	if raw[8] != "" {
		m.cred = []byte(raw[8])
	}
	n, _ := strconv.Atoi(raw[9])
	m.body, m.asked = raw[10:10+n], raw[10+n:]
	return m
}

// reload makes s's copy afresh from the scope's records, read
// recReadAtOnce at a time (HSCAN) after version v: then the writes made
// while they were read, from the log, and the blob, in one exchange. If
// the log no longer holds them all it reads again.
func (p *recProto) reload(ctx context.Context, s *recScope, v int64) error {
	for range 10 {
		fields := map[string][]byte{}
		var cursor uint64
		for {
			kv, next, err := p.rdb.HScan(ctx, s.keys[0], cursor, "", recReadAtOnce).Result()
			if err != nil {
				return err
			}
			for i := 0; i+1 < len(kv); i += 2 {
				if k := kv[i]; k != "v" && k != "b" && k != "t" {
					fields[k] = []byte(kv[i+1])
				}
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
		raw, err := p.send(ctx, s.keys, []any{v, "reload", s.credVersion})
		if err != nil {
			return err
		}
		m := parseMissed(raw)
		if m.mode != "same" && m.mode != "log" {
			v = m.version // written past the log meanwhile: again
			continue
		}
		for _, e := range m.body {
			if err := recParseEntry(e, fields); err != nil {
				return err
			}
		}
		for k, val := range fields {
			if val == nil {
				delete(fields, k)
			}
		}
		fields[capacity.CredentialRecord] = m.cred
		s.version, s.credVersion = m.version, m.credVersion
		p.freshCopy(s)
		return s.copy.LoadRecords(s.sc, capacity.Records{Blob: []byte(m.blob), Fields: fields})
	}
	return errors.New("recproto: the scope changed past its log through ten reloads")
}

// recEntry encodes a write's records for the log: names and values, each
// after its length (a deletion's value is empty).
func recEntry(fields map[string][]byte) string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		if n != capacity.CredentialRecord { // not the scope's: kept apart
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var b []byte
	for _, n := range names {
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
		b = binary.AppendUvarint(b, uint64(len(fields[n])))
		b = append(b, fields[n]...)
	}
	return string(b)
}

// recNotice is what a write at now announces to the processes where
// calls wait on its scope: "r" if a lease ended (a slot or a refund came
// back) while a call denied may come back on it, "-" if not, then the
// calls whose tickets came forward; "" for nothing.
func recNotice(ch capacity.Records, now time.Time) string {
	released := false
	if !ch.WaitersUntil.Before(now) {
		for name, v := range ch.Fields {
			released = released || name[0] == 'l' && v == nil
		}
	}
	if !released && len(ch.Announced) == 0 {
		return ""
	}
	head := "-"
	if released {
		head = "r"
	}
	return strings.Join(append([]string{head}, ch.Announced...), " ")
}

// recParseEntry adds the records of log entry e to fields, later entries
// overwriting earlier ones.
func recParseEntry(e string, fields map[string][]byte) error {
	b := []byte(e)
	for len(b) > 0 {
		var parts [2][]byte
		for i := range parts {
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				return fmt.Errorf("recproto: a log entry cut short")
			}
			parts[i], b = b[n:n+int(l)], b[n+int(l):]
		}
		if len(parts[1]) == 0 {
			fields[string(parts[0])] = nil
		} else {
			fields[string(parts[0])] = parts[1]
		}
	}
	return nil
}

func (p *recProto) Reserve(ctx context.Context, req capacity.Request) (res capacity.Reservation, err error) {
	err = p.do(req.Scope, func(s *capacity.MemoryStore) (err error) {
		res, err = s.Reserve(ctx, req)
		return err
	})
	return res, err
}

func (p *recProto) Settle(ctx context.Context, le capacity.Lease, final capacity.Charges) error {
	return p.do(le.Scope, func(s *capacity.MemoryStore) error { return s.Settle(ctx, le, final) })
}

func (p *recProto) Release(ctx context.Context, le capacity.Lease) error {
	return p.do(le.Scope, func(s *capacity.MemoryStore) error { return s.Release(ctx, le) })
}

func (p *recProto) Renew(ctx context.Context, le capacity.Lease, ttl time.Duration) (out capacity.Lease, err error) {
	err = p.do(le.Scope, func(s *capacity.MemoryStore) (err error) {
		out, err = s.Renew(ctx, le, ttl)
		return err
	})
	return out, err
}

func (p *recProto) Observe(ctx context.Context, sc capacity.Scope, o capacity.Observation) error {
	return p.do(sc, func(s *capacity.MemoryStore) error { return s.Observe(ctx, sc, o) })
}

func (p *recProto) Block(ctx context.Context, sc capacity.Scope, b capacity.Block) error {
	return p.do(sc, func(s *capacity.MemoryStore) error { return s.Block(ctx, sc, b) })
}

func (p *recProto) Unblock(ctx context.Context, sc capacity.Scope, credential bool) error {
	return p.do(sc, func(s *capacity.MemoryStore) error { return s.Unblock(ctx, sc, credential) })
}

func (p *recProto) Snapshot(ctx context.Context, sc capacity.Scope) (snap capacity.Snapshot, err error) {
	err = p.do(sc, func(s *capacity.MemoryStore) (err error) {
		snap, err = s.Snapshot(ctx, sc)
		return err
	})
	return snap, err
}

func (p *recProto) AddFailure(ctx context.Context, sc capacity.Scope, call string, ttl time.Duration) (n int, err error) {
	err = p.do(sc, func(s *capacity.MemoryStore) (err error) {
		n, err = s.AddFailure(ctx, sc, call, ttl)
		return err
	})
	return n, err
}

// Released and TicketDue return the channels of the scope's copy: a
// write in this process closes them as the memory store does, and one in
// another process announces on the scope's channel the leases it ended and
// the tickets it brought forward, which wakes them here (MemoryStore.Wake);
// a call woken looks again, its copy reading what it missed.
func (p *recProto) Released(sc capacity.Scope) (<-chan struct{}, func()) {
	s := p.waitOn(sc)
	if s == nil {
		return make(chan struct{}), func() {}
	}
	return s.Released(sc)
}

func (p *recProto) TicketDue(sc capacity.Scope, call string) (<-chan struct{}, func()) {
	s := p.waitOn(sc)
	if s == nil {
		return make(chan struct{}), func() {}
	}
	return s.TicketDue(sc, call)
}

// waitOn subscribes sc's channel, once, and returns its copy (nil before
// the copy's first batch).
func (p *recProto) waitOn(sc capacity.Scope) *capacity.MemoryStore {
	if sc.Validate() != nil {
		return nil
	}
	s := p.scope(sc)
	p.subOnce.Do(func() {
		p.sub = p.rdb.SSubscribe(context.Background())
		go p.listen()
	})
	if _, done := p.subscribed.LoadOrStore(s.keys[3], s); !done {
		_ = p.sub.SSubscribe(context.Background(), s.keys[3])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waitCopy
}

// listen wakes the calls waiting on a scope for what another process
// announced on its channel, and every waiter of a scope once its channel's
// subscription is confirmed (a notice may have come before).
func (p *recProto) listen() {
	for msg := range p.sub.ChannelWithSubscriptions() {
		var channel string
		switch m := msg.(type) {
		case *redis.Message:
			channel = m.Channel
		case *redis.Subscription:
			channel = m.Channel
		}
		v, ok := p.subscribed.Load(channel)
		if !ok {
			continue
		}
		s := v.(*recScope)
		s.mu.Lock()
		copy := s.waitCopy
		s.mu.Unlock()
		if copy == nil {
			continue
		}
		if m, ok := msg.(*redis.Message); ok {
			f := strings.Fields(m.Payload)
			if len(f) > 0 {
				copy.Wake(s.sc, f[0] == "r", f[1:])
			}
		} else {
			copy.Wake(s.sc, true, nil) // a notice may have come before the subscription
		}
	}
}

// TestRecProtoContract runs the contract suite on the prototype, two
// processes' copies taking turns on each scope: the rules are the memory
// store's, so what it checks is that the copies keep one scope between
// them.
func TestRecProtoContract(t *testing.T) {
	t.Parallel()
	runRecProtoContract(t, testenv.RedisClient(t))
}

// TestRecProtoCluster runs the contract suite on a Redis Cluster of three
// masters: a scope's keys, its credential's and its channel are in one
// slot.
func TestRecProtoCluster(t *testing.T) {
	t.Parallel()
	runRecProtoContract(t, testenv.StartRedisCluster(t, 3).Client(t))
}

// recACL is the least a Redis user needs for the prototype: the commands
// decision 0008 lists for the engine, on the test prefix's keys and
// channels.
const recACL = "on >s3cret resetkeys ~{tgtest-* resetchannels &{tgtest-* -@all +evalsha +eval +ssubscribe +sunsubscribe " +
	"+ping +hello +time +hget +hmget +hset +hdel +hlen +hgetall +hscan +rpush +lrange +ltrim +llen +pexpire +spublish"

// TestRecProtoACL runs the contract suite, and a copy's read of a large
// scope in chunks, as a Redis user with no more than recACL.
func TestRecProtoACL(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedisServer(t, "")
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	ctx := context.Background()
	args := []any{"ACL", "SETUSER", "tollgate"}
	for _, f := range strings.Fields(recACL) {
		args = append(args, f)
	}
	if err := admin.Do(ctx, args...).Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "tollgate", Password: "s3cret"})
	defer rdb.Close()
	runRecProtoContract(t, rdb)
	testRecProtoReloads(t, rdb)
}

// recTestPrefix returns a fresh key prefix whose keys are deleted when
// the test ends.
func recTestPrefix(t testing.TB, rdb redis.UniversalClient) string {
	var buf [6]byte
	_, _ = rand.Read(buf[:])
	prefix := "tgtest-" + hex.EncodeToString(buf[:])
	t.Cleanup(func() {
		keys, _ := rdb.Keys(context.Background(), "{"+prefix+":*").Result()
		if len(keys) > 0 {
			rdb.Del(context.Background(), keys...)
		}
	})
	return prefix
}

// runRecProtoContract runs the contract suite, class and fair cases on
// two prototypes on rdb taking turns.
func runRecProtoContract(t *testing.T, rdb redis.UniversalClient) {
	factory := func(t *testing.T, clock capacity.Clock) capacity.Store {
		prefix := recTestPrefix(t, rdb)
		return &recPair{a: &recProto{rdb: rdb, prefix: prefix, clock: clock}, b: &recProto{rdb: rdb, prefix: prefix, clock: clock}}
	}
	storetest.Run(t, factory)
	storetest.RunCases(t, storetest.ClassCases, factory)
	storetest.RunCases(t, storetest.FairCases, factory)
}

// recPair is two processes' prototypes on the same keys, each operation
// sent to the one whose turn it is.
type recPair struct {
	a, b *recProto
	turn atomic.Int64
}

func (r *recPair) next() *recProto {
	if r.turn.Add(1)%2 == 0 {
		return r.a
	}
	return r.b
}

func (r *recPair) Reserve(ctx context.Context, req capacity.Request) (capacity.Reservation, error) {
	return r.next().Reserve(ctx, req)
}
func (r *recPair) Settle(ctx context.Context, le capacity.Lease, final capacity.Charges) error {
	return r.next().Settle(ctx, le, final)
}
func (r *recPair) Release(ctx context.Context, le capacity.Lease) error {
	return r.next().Release(ctx, le)
}
func (r *recPair) Renew(ctx context.Context, le capacity.Lease, ttl time.Duration) (capacity.Lease, error) {
	return r.next().Renew(ctx, le, ttl)
}
func (r *recPair) Observe(ctx context.Context, sc capacity.Scope, o capacity.Observation) error {
	return r.next().Observe(ctx, sc, o)
}
func (r *recPair) Block(ctx context.Context, sc capacity.Scope, b capacity.Block) error {
	return r.next().Block(ctx, sc, b)
}
func (r *recPair) Unblock(ctx context.Context, sc capacity.Scope, credential bool) error {
	return r.next().Unblock(ctx, sc, credential)
}
func (r *recPair) Snapshot(ctx context.Context, sc capacity.Scope) (capacity.Snapshot, error) {
	return r.next().Snapshot(ctx, sc)
}
func (r *recPair) AddFailure(ctx context.Context, sc capacity.Scope, call string, ttl time.Duration) (int, error) {
	return r.next().AddFailure(ctx, sc, call, ttl)
}

// BenchmarkRecProtoCall is one process's reserve and settle over many
// scopes on the prototype, for profiling the client's side.
func BenchmarkRecProtoCall(b *testing.B) {
	rdb := testenv.RedisClient(b)
	p := newRecProto(rdb, recTestPrefix(b, rdb))
	lim := capacity.Limits{RequestsPerMinute: 6000}
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			i := n.Add(1)
			sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: fmt.Sprintf("m%d", i%1000), Credential: "c0"}
			res, err := p.Reserve(ctx, capacity.Request{Scope: sc, Limits: lim, Charges: capacity.Charges{capacity.Requests: 1}, Call: fmt.Sprintf("c%d", i), Attempt: 1})
			if err != nil || !res.Granted {
				b.Fatal(err, res.Reason)
			}
			if err := p.Settle(ctx, res.Lease, res.Lease.Charges); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestRecProtoReloadsInChunks has a second process open a scope with more
// records than one script reads: it reads them in chunks and holds the
// same scope as the process that wrote them.
func TestRecProtoReloadsInChunks(t *testing.T) {
	testRecProtoReloads(t, testenv.RedisClient(t))
}

func testRecProtoReloads(t *testing.T, rdb redis.UniversalClient) {
	prefix := recTestPrefix(t, rdb)
	ctx := context.Background()
	a, b := newRecProto(rdb, prefix), newRecProto(rdb, prefix)
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "reload"}
	lim := capacity.Limits{RequestsPerMinute: 60}
	for i := range 3 * recReadAtOnce {
		_, err := a.Reserve(ctx, capacity.Request{Scope: sc, Limits: lim, Call: fmt.Sprintf("c%d", i), Attempt: 1,
			Charges: capacity.Charges{capacity.Requests: 1}, Book: true, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := rdb.HLen(ctx, a.scope(sc).keys[0]).Result(); n <= recReadAtOnce {
		t.Fatalf("the scope holds %d records, not more than one script reads", n)
	}
	snapB, err := b.Snapshot(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	if b.Reloads.Load() != 1 {
		t.Fatalf("%d reloads", b.Reloads.Load())
	}
	snapA, err := a.Snapshot(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	snapA.Now, snapB.Now = time.Time{}, time.Time{}
	if len(snapB.Tickets) != len(snapA.Tickets) || len(snapB.Tickets) < 3*recReadAtOnce-10 {
		t.Fatalf("tickets: %d read, %d written", len(snapB.Tickets), len(snapA.Tickets))
	}
	recA, recB := a.scope(sc).copy.ScopeRecords(sc), b.scope(sc).copy.ScopeRecords(sc)
	if len(recA.Fields) != len(recB.Fields) {
		t.Fatalf("%d records read, %d written", len(recB.Fields), len(recA.Fields))
	}
	for k, v := range recA.Fields {
		if string(recB.Fields[k]) != string(v) {
			t.Fatalf("record %q differs", k)
		}
	}
}

// TestRecProtoNoticesWakeWaiters has a call wait in one process for a
// slot a call in another process holds: the other's settle wakes it.
func TestRecProtoNoticesWakeWaiters(t *testing.T) {
	rdb := testenv.RedisClient(t)
	prefix := recTestPrefix(t, rdb)
	ctx := context.Background()
	a, b := newRecProto(rdb, prefix), newRecProto(rdb, prefix)
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "notice"}
	lim := capacity.Limits{RequestsPerMinute: 6000, MaxInFlight: 1}
	req := capacity.Request{Scope: sc, Limits: lim, Call: "c1", Attempt: 1, Charges: capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}}
	held, err := a.Reserve(ctx, req)
	if err != nil || !held.Granted {
		t.Fatal(err, held.Reason)
	}
	req.Call = "c2"
	res, err := b.Reserve(ctx, req)
	if err != nil || res.Granted {
		t.Fatal(err, "granted beside a held slot")
	}
	released, stop := b.Released(sc)
	defer stop()
	if err := a.Settle(ctx, held.Lease, held.Lease.Charges); err != nil {
		t.Fatal(err)
	}
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken by the other process's settle")
	}
	res, err = b.Reserve(ctx, req)
	if err != nil || !res.Granted {
		t.Fatal(err, res.Reason)
	}
}

// TestRecProtoKeysLiveAsLongAsTheScopeMatters settles a short call: the
// scope's keys expire soon after its lease would have, not a day later.
func TestRecProtoKeysLiveAsLongAsTheScopeMatters(t *testing.T) {
	rdb := testenv.RedisClient(t)
	prefix := recTestPrefix(t, rdb)
	ctx := context.Background()
	p := newRecProto(rdb, prefix)
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "ttl"}
	res, err := p.Reserve(ctx, capacity.Request{Scope: sc, Limits: capacity.Limits{RequestsPerMinute: 60_000}, Call: "c1", Attempt: 1,
		Charges: capacity.Charges{capacity.Requests: 1}, TTL: time.Second})
	if err != nil || !res.Granted {
		t.Fatal(err, res.Reason)
	}
	if err := p.Settle(ctx, res.Lease, res.Lease.Charges); err != nil {
		t.Fatal(err)
	}
	for _, key := range p.scope(sc).keys[:2] {
		ttl, err := rdb.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= 0 || ttl > time.Second+recSlack {
			t.Fatalf("%s lives %v more; the lease would have expired within a second", key, ttl)
		}
	}
}

func (p *recProto) Summary(ctx context.Context, sc capacity.Scope, call string) (sum capacity.Summary, err error) {
	err = p.do(sc, func(s *capacity.MemoryStore) (err error) {
		sum, err = s.Summary(ctx, sc, call)
		return err
	})
	return sum, err
}

// TestRecProtoReadsWriteNothing reads a scope (Snapshot, Summary) from a
// second process: its version does not move.
func TestRecProtoReadsWriteNothing(t *testing.T) {
	rdb := testenv.RedisClient(t)
	prefix := recTestPrefix(t, rdb)
	ctx := context.Background()
	a, b := newRecProto(rdb, prefix), newRecProto(rdb, prefix)
	sc := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "reads"}
	res, err := a.Reserve(ctx, capacity.Request{Scope: sc, Limits: capacity.Limits{RequestsPerMinute: 60}, Call: "c1", Attempt: 1,
		Charges: capacity.Charges{capacity.Requests: 1}, TTL: time.Minute})
	if err != nil || !res.Granted {
		t.Fatal(err, res.Reason)
	}
	version := func() string { return rdb.HGet(ctx, a.scope(sc).keys[0], "v").Val() }
	before := version()
	snap, err := b.Snapshot(ctx, sc)
	if err != nil || len(snap.Leases) != 1 {
		t.Fatalf("snapshot: %v, %d leases", err, len(snap.Leases))
	}
	sum, err := b.Summary(ctx, sc, "")
	if err != nil || sum.InFlight != 1 {
		t.Fatalf("summary: %v, %d in flight", err, sum.InFlight)
	}
	if after := version(); after != before {
		t.Fatalf("reads moved the version from %s to %s", before, after)
	}
}

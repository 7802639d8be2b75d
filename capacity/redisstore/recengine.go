package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// The records engine (Options.Engine EngineRecords; decision 0008) decides
// every operation with the memory store's rules, in Go, on a copy of the
// scope that each Store keeps: a capacity.MemoryStore that tracks the
// scope's records. Redis holds the records, and one short script
// (lua/exchange.lua) writes the records a decision changed if the scope is
// still at the copy's version, or returns what the copy missed.
//
// A Store's operations on a scope form batches: the first caller to find
// none running decides the pending ones (recBatchMax at most) on the copy,
// at the time it estimates Redis's to be, and sends the exchange. If
// another worker wrote first, the copy applies what it missed and decides
// the batch again. A batch on a current copy costs one script call.
//
// Key layout, beside the scripts' (keys.go), under the same hash tag:
//
//	{P:C}:rec:K      the scope's records (hash: v version, b blob, t last write's time, records by name);
//	                 TTL: when the scope stops mattering (capacity.Records.RestsAt) plus recSlack
//	{P:C}:reclog:K   the last writes' records (list: recLogLength, more for a large scope); TTL: the records'
//	{P:C}:reccred    the credential's block (hash: v version, b block); TTL: when it stops mattering
//	                 (capacity.Records.CredentialRestsAt) plus recSlack
//	{P:C}:n:K        the scope's channel, as the scripts': releases and tickets due
const (
	recInfix      = ":rec:"
	recLogInfix   = ":reclog:"
	recCredSuffix = ":reccred"
)

// recLogLength is how many writes a scope's log keeps at least, and
// recRecordsPerWrite how many of its records it keeps one more write for: a
// copy at most that many writes behind reads only what it missed, and a
// large scope (the hot one's thousands of tickets) keeps a longer log, so
// that a copy idle for a moment need not read every record while others
// write.
const (
	recLogLength       = 16
	recRecordsPerWrite = 16
)

// recBatchMax is the most operations one batch decides: with 10,000
// callers over 8 processes, batches of 64 queued behind one another
// (Reserve p99 55-66 ms after the first second; 256: 10-34 ms).
const recBatchMax = 256

// recWakePerRelease is how many of a scope's local waiters a release wakes
// on a records Store: one batch's worth, decided together; the rest wait
// on for their tickets, their retry times or the next release. Waking every
// one cost a batch per 256 waiters for each release.
const recWakePerRelease = recBatchMax

// recFreshFor is how long after its last exchange a copy is taken to be
// current: a batch on a copy older than that reads what it missed first,
// rather than deciding on it and being refused, unless the last such read
// found that no other worker had written (recScope.alone).
const recFreshFor = 20 * time.Millisecond

// recClockFor is how long a copy decides on the Redis TIME it last read
// (plus the time elapsed since, on this host's clock) before it reads
// Redis again first, so that the two clocks' drift stays a matter of
// microseconds on a scope only this Store writes.
const recClockFor = 10 * time.Second

// recForgetAfter is how long a copy of a scope may go unused before its
// Store drops it, so that a worker that touches many scopes over its life
// keeps copies of those in use only (each holds the scope's records). A
// scope whose copy was dropped is read whole at its next use.
const recForgetAfter = time.Minute

// recWriteMaxAge is how long after its decision a batch's write still
// applies: one that reaches Redis later (Redis paused, the worker stalled)
// is refused as if another worker had written first, and the batch is
// decided again at Redis's time. Without it, a grant written 6 s after its
// decision gave its call a lease that had already run out (TestChaos,
// RedisPause: the slot was taken again and the provider answered 429).
const recWriteMaxAge = time.Second

// recReadAtOnce is the most records one script reads: a copy of a larger
// scope that is further behind than the log reads them this many at a time
// (HSCAN).
const recReadAtOnce = 256

// recSlack is how long a scope's records live past when they stop
// mattering, for the differences between the workers' estimates of Redis
// time.
const recSlack = 5 * time.Second

// recMaxConflicts is how many times a batch is decided again, each time
// after applying what another worker wrote first, before it fails.
const recMaxConflicts = 100

// ErrConflicts is returned (wrapped) by an operation of the records engine
// whose batch found the scope written by another worker recMaxConflicts
// times in a row.
var ErrConflicts = errors.New("redisstore: the scope was written by others on every try")

// recEngine is a Store's records engine.
type recEngine struct {
	s      *Store
	scopes scopeMap[*recScope]
	pipe   recPipe

	writes, conflicts, reloads atomic.Int64
	// swept is when the copies unused for recForgetAfter were last
	// dropped (unix ns).
	swept atomic.Int64
}

func newRecEngine(s *Store) *recEngine {
	e := &recEngine{s: s, pipe: recPipe{rdb: s.rdb}}
	e.swept.Store(time.Now().UnixNano())
	return e
}

// sweep drops, once every recForgetAfter, in the background, the copies
// unused for that long.
func (e *recEngine) sweep() {
	now, last := time.Now().UnixNano(), e.swept.Load()
	if now-last < int64(recForgetAfter) || !e.swept.CompareAndSwap(last, now) {
		return
	}
	go e.forget(time.Unix(0, now).Add(-recForgetAfter))
}

// forget drops the copy of every scope whose last exchange was before
// cutoff and that no batch is deciding: its next batch reads the scope
// whole. What the Store remembers of the scope apart from the copy (its
// keys, the version it last saw, when it rests) stays.
func (e *recEngine) forget(cutoff time.Time) {
	e.scopes.each(func(s *recScope) {
		s.mu.Lock()
		if !s.running && s.copy != nil && s.touched.Before(cutoff) {
			s.copy, s.clock, s.blob = nil, nil, nil
			s.version, s.credVersion = -1, -1
		}
		s.mu.Unlock()
	})
}

// recScope is one scope's copy, keys and pending operations.
type recScope struct {
	sc       capacity.Scope
	scopeKey string
	keys     []string // the exchange's KEYS: records, log, credential's block, channel, the scripts' state
	head     []any    // the start of its every exchange's command (recCommandHead)

	mu      sync.Mutex
	pending []*recOp
	running bool

	// Owned by the batch running.
	copy        *capacity.MemoryStore
	clock       *recClock
	version     int64 // of the records the copy holds; -1: none
	credVersion int64 // of the credential's block the copy holds
	// blob is the scope's blob as the copy last read or wrote it: a batch
	// that leaves it so and changes no record writes nothing.
	blob  []byte
	wrote bool // the last exchange wrote
	// fields holds the records an exchange read, for the copy to load
	// (kept between exchanges: LoadRecords keeps none of it).
	fields map[string][]byte
	// timeAt is Redis TIME (unix ns) as last read, at readAt; last is the
	// time of the scope's last write (unix ns); touched is when the copy
	// last exchanged.
	timeAt, last    int64
	readAt, touched time.Time
	// restsAt is when the scope stops mattering, as of this copy's last
	// write, and seen the latest version of the scope read or written
	// (kept when a failed batch drops the copy): a version below it before
	// restsAt means the records were lost, not expired.
	restsAt time.Time
	seen    int64
	// behind is set when the last exchange found writes the copy missed.
	// alone is set when the last read before a batch found none, and
	// cleared when another worker's write refuses one of this Store's: a
	// worker alone on a scope writes without reading first, one script
	// call a batch.
	behind, alone bool
	// out is the exchange the batch sends, made once and sent again, its
	// command built in the same slice each time; names and values are the
	// lists a write's changed records are given in, kept for their room.
	out    recCall
	names  []string
	values [][]byte
}

// recOp is one operation waiting for its batch.
type recOp struct {
	run func(s *capacity.MemoryStore) error
	// abandon, if set, undoes what run did, for a caller that gave up
	// after its operation was taken into a batch.
	abandon func()
	state   atomic.Int32 // recPending, recDone or recAbandoned
	err     error        // run's
	failed  error        // Redis's, for the whole batch
	done    chan struct{}
}

const (
	recPending = iota
	recDone
	recAbandoned
)

// recClock is a copy's clock: the time its batch is decided at.
type recClock struct{ now atomic.Int64 }

func (c *recClock) Now() time.Time { return time.Unix(0, c.now.Load()).UTC() }

func (c *recClock) NewTimer(d time.Duration) capacity.Timer {
	return capacity.SystemClock{}.NewTimer(d)
}

func (e *recEngine) scope(sc capacity.Scope) *recScope {
	return e.scopes.get(sc, func() *recScope {
		k := e.s.keysFor(sc)
		s := &recScope{sc: sc, scopeKey: k.scopeKey, version: -1,
			keys: []string{k.keys[keyRecords], k.tag + recLogInfix + k.scopeKey, k.tag + recCredSuffix, k.channel, k.keys[keyState]}}
		s.head = recCommandHead(s.keys)
		return s
	})
}

// do runs op on sc's copy in the scope's next batch and returns its error:
// ctx's if ctx ends first (op is then skipped, or undone with abandon),
// Redis's as the store reports it (Store.failed), else op's own. The first
// caller to find no batch running on the scope runs the batches, its own
// first, until none is pending.
func (e *recEngine) do(ctx context.Context, name string, sc capacity.Scope, run func(s *capacity.MemoryStore) error, abandon func()) error {
	e.sweep()
	s := e.scope(sc)
	op := &recOp{run: run, abandon: abandon, done: make(chan struct{})}
	s.mu.Lock()
	s.pending = append(s.pending, op)
	lead := !s.running
	s.running = true
	s.mu.Unlock()
	if lead {
		e.lead(s)
	}
	select {
	case <-op.done:
	case <-ctx.Done():
		if op.state.CompareAndSwap(recPending, recAbandoned) {
			return ctx.Err()
		}
		<-op.done
	}
	switch err := op.failed; {
	case err == nil:
	case errors.Is(err, ErrConflicts):
		// Contention, not an outage: this operation fails, the store
		// goes on using Redis.
		return fmt.Errorf("redisstore: %s: %w: %w", name, capacity.ErrStoreUnavailable, err)
	case errors.Is(err, errOnScripts):
		return err // the Store runs it with the scripts (recroute.go)
	case errors.Is(err, capacity.ErrStoreUnavailable):
		return err // Redis down (Store.down)
	case errors.Is(err, ErrBadReply) || errors.Is(err, capacity.ErrBadRecord):
		return fmt.Errorf("redisstore: %s: %w", name, err)
	default:
		return e.s.failed(ctx, name, err)
	}
	e.s.up()
	return op.err
}

// lead runs s's pending batches until none is left.
func (e *recEngine) lead(s *recScope) {
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
		// Redis found unreachable (by this batch's predecessor, say):
		// the batch fails at once, as the scripts' calls do, rather than
		// wait for the client to find it so again.
		err := e.s.down("exchange")
		if err == nil {
			batch, err = e.run(s, batch)
		}
		if err != nil {
			// The copy may hold a decision Redis never took: the next
			// batch starts from Redis's records.
			s.copy, s.version, s.credVersion = nil, -1, -1
		}
		for _, op := range batch {
			op.failed = err
			if !op.state.CompareAndSwap(recPending, recDone) && err == nil && op.abandon != nil {
				go op.abandon() // its caller gave up while it was decided
			}
			close(op.done)
		}
	}
}

// run decides batch until its write applies, and returns the batch it
// decided: a batch refused because another worker wrote first takes in the
// operations that arrived meanwhile (up to recBatchMax), since it is decided
// again anyway. An operation abandoned before the batch started is
// skipped.
func (e *recEngine) run(s *recScope, batch []*recOp) ([]*recOp, error) {
	ctx := context.Background()
	if s.copy == nil || !s.alone && time.Since(s.touched) > recFreshFor || time.Since(s.readAt) > recClockFor {
		// Likely stale: read what the copy missed before deciding.
		had := s.copy != nil
		read := s.args("read")
		if err := e.exchange(ctx, s, &read); err != nil {
			return batch, err
		}
		s.alone = had && !s.behind
	}
	for try := range recMaxConflicts {
		redisNow := s.now()
		now := redisNow
		if c := e.s.opts.Clock; c != nil {
			now = c.Now().UnixNano()
		}
		s.clock.now.Store(now)
		for _, op := range batch {
			if op.state.Load() != recAbandoned {
				op.err = op.run(s.copy)
			}
		}
		ch := s.copy.TakeRecords(s.sc)
		if len(ch.Fields) == 0 && len(ch.Announced) == 0 && bytes.Equal(ch.Blob, s.blob) {
			// Nothing to write (a read): done if the copy was current,
			// else decide again on what it missed.
			version, cred := s.version, s.credVersion
			read := s.args("read")
			if err := e.exchange(ctx, s, &read); err != nil {
				return batch, err
			}
			if s.version == version && s.credVersion == cred {
				return batch, nil
			}
			s.alone = false
			continue
		}
		at := time.Unix(0, now)
		release, due := recNotices(ch, at, e.s.id)
		ttl := max(ch.RestsAt.Sub(at), 0) + recSlack
		args := s.args(strconv.FormatInt(now, 10))
		args.credTTL, args.decided = recCredTTL(ch, at), time.Unix(0, redisNow).UnixMilli()
		args.blob, args.entry, args.ttl = ch.Blob, recEntry(ch.Fields), ttl.Milliseconds()
		args.release, args.due, args.cred = release, due, recCredArg(ch.Fields)
		args.names, args.values = s.names[:0], s.values[:0]
		for name, value := range ch.Fields {
			if name != capacity.CredentialRecord {
				args.names, args.values = append(args.names, name), append(args.values, value)
			}
		}
		err := e.exchange(ctx, s, &args)
		s.names, s.values = args.names, args.values
		clear(s.values) // the records are the write's: let them go
		if err != nil {
			return batch, err
		}
		if s.wrote {
			s.last, s.touched, s.blob, s.restsAt = max(s.last, now), time.Now(), ch.Blob, ch.RestsAt
			e.writes.Add(1)
			e.wakeLocal(s, release, ch.Announced)
			return batch, nil
		}
		e.conflicts.Add(1)
		s.alone = false
		if try+1 < recMaxConflicts {
			batch = s.takeIn(batch) // not for a last try that will not come
		}
	}
	return batch, fmt.Errorf("%w (%d tries)", ErrConflicts, recMaxConflicts)
}

// takeIn returns batch with the operations pending on s after it, up to
// recBatchMax in all, taken off s's queue.
func (s *recScope) takeIn(batch []*recOp) []*recOp {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(len(s.pending), recBatchMax-len(batch))
	if n <= 0 {
		return batch
	}
	batch = append(batch, s.pending[:n]...)
	s.pending = append([]*recOp(nil), s.pending[n:]...)
	return batch
}

// args returns the exchange's arguments for what (a read, a reload or a
// write's time) on s: the versions it holds; a write adds the rest.
func (s *recScope) args(what string) recArgs {
	return recArgs{have: s.version, credHave: s.credVersion, what: what}
}

// recCredTTL is how long the credential's block lives after a write at
// now that changes it (ms): until it stops mattering, and recSlack.
func recCredTTL(ch capacity.Records, now time.Time) int64 {
	return (max(ch.CredentialRestsAt.Sub(now), 0) + recSlack).Milliseconds()
}

// now is s's estimate of Redis's time (unix ns): the last TIME read plus
// the time elapsed since, never before the scope's last write.
func (s *recScope) now() int64 {
	return max(s.timeAt+time.Since(s.readAt).Nanoseconds(), s.last)
}

// wakeLocal wakes this Store's calls waiting on s for what its write
// announced (other workers' are woken by the message on the channel).
func (e *recEngine) wakeLocal(s *recScope, release string, due []string) {
	if release != "" {
		e.s.notify.wake(s.scopeKey, recWakePerRelease)
	}
	if len(due) > 0 {
		e.s.notify.ticketsDue(s.scopeKey, due)
	}
}

// exchange runs the exchange script with args and applies its reply: the
// new versions, or what the copy missed (args names the records the batch
// changed, whose values it reads back).
func (e *recEngine) exchange(ctx context.Context, s *recScope, args *recArgs) error {
	if s.out.done == nil {
		s.out = *newRecCall(recCommand{keys: s.keys})
	}
	s.out.cmd = args.command(s.out.cmd, s.head, s.keys).cmd
	raw, err := e.pipe.send(ctx, &s.out)
	clear(s.out.cmd) // what the command held (the blob, the records) is the write's
	s.out.raw = nil
	if err != nil {
		return err
	}
	if len(raw) == 1 && raw[0] == "scripts" {
		return errOnScripts
	}
	if len(raw) == 3 && raw[0] == "ok" {
		s.wrote, s.behind = true, false
		s.version, err = strconv.ParseInt(raw[1], 10, 64)
		if err == nil {
			s.credVersion, err = strconv.ParseInt(raw[2], 10, 64)
		}
		s.seen = s.version
		return err
	}
	s.wrote = false
	m, err := parseMissed(raw)
	if err != nil {
		return err
	}
	if m.version < s.seen && time.Unix(0, m.time).Before(s.restsAt) {
		e.lost(s)
	}
	s.seen, s.behind = m.version, m.mode != "same"
	s.timeAt, s.readAt, s.last = m.time, time.Now(), m.last
	s.touched = s.readAt
	if m.mode == "far" {
		return e.reload(ctx, s, m.version)
	}
	if s.copy != nil && m.mode == "same" && m.blob == "" && args.what == "read" { // a read of a current copy
		if m.credVersion == s.credVersion {
			return nil
		}
		s.credVersion = m.credVersion
		return s.copy.LoadRecords(s.sc, capacity.Records{Fields: map[string][]byte{capacity.CredentialRecord: m.cred}})
	}
	if s.copy == nil || m.mode == "all" || m.blob == "" {
		// A copy afresh: the first, one past the log, or of a scope never
		// written (what a refused batch changed goes with the old one).
		e.freshCopy(s)
		if m.blob == "" {
			// What a batch that changes nothing leaves: a read or an
			// Unblock of a scope never written writes nothing.
			s.blob = s.copy.TakeRecords(s.sc).Blob
		}
	}
	s.version, s.credVersion = m.version, m.credVersion
	if s.fields == nil {
		s.fields = map[string][]byte{}
	}
	clear(s.fields)
	s.fields[capacity.CredentialRecord] = m.cred
	recs := capacity.Records{Fields: s.fields}
	if m.blob != "" {
		recs.Blob = []byte(m.blob)
		s.blob = recs.Blob
	}
	switch m.mode {
	case "log":
		for _, entry := range m.body {
			if err := recParseEntry(entry, recs.Fields); err != nil {
				return err
			}
		}
	case "all":
		for i := 0; i+1 < len(m.body); i += 2 {
			recs.Fields[m.body[i]] = []byte(m.body[i+1])
		}
	}
	if len(m.asked) != len(args.names) {
		return fmt.Errorf("%w: exchange: %d values for %d records", ErrBadReply, len(m.asked), len(args.names))
	}
	for i, v := range m.asked {
		name := args.names[i]
		if v == "" {
			recs.Fields[name] = nil
		} else {
			recs.Fields[name] = []byte(v)
		}
	}
	return s.copy.LoadRecords(s.sc, recs)
}

// lost counts and logs that s's records were lost (Redis restarted
// without persistence, failed over or evicted them) while they mattered:
// the scope starts again empty, its budgets at the burst level. Calls
// waiting on the credential look again.
func (e *recEngine) lost(s *recScope) {
	e.s.resets.Add(1)
	if l := e.s.opts.Logger; l != nil {
		l.Warn("tollgate: Redis state of a scope was lost; its budgets restart at the burst level", "scope", s.scopeKey)
	}
	e.s.notify.wakeCredential(s.sc.CredentialKey())
}

// freshCopy gives s an empty copy of its scope.
func (e *recEngine) freshCopy(s *recScope) {
	s.clock = &recClock{}
	s.copy = capacity.NewMemoryStore(capacity.MemoryOptions{Clock: s.clock, TicketGrace: e.s.opts.TicketGrace})
	s.copy.TrackRecords(s.sc)
	e.reloads.Add(1)
}

// reload makes s's copy afresh from the scope's records, read
// recReadAtOnce at a time (HSCAN) after version v, then the writes made
// while they were read, from the log, and the blob, in one exchange. If
// the log no longer holds them all it reads again.
func (e *recEngine) reload(ctx context.Context, s *recScope, v int64) error {
	for range 10 {
		fields := map[string][]byte{}
		var cursor uint64
		for {
			kv, next, err := e.s.rdb.HScan(ctx, s.keys[0], cursor, "", recReadAtOnce).Result()
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
		s.version = v
		reload := s.args("reload")
		raw, err := e.pipe.send(ctx, newRecCall(reload.command(nil, s.head, s.keys)))
		if err != nil {
			return err
		}
		if len(raw) == 1 && raw[0] == "scripts" {
			return errOnScripts
		}
		m, err := parseMissed(raw)
		if err != nil {
			return err
		}
		if m.mode != "same" && m.mode != "log" {
			v = m.version // written past the log meanwhile: again
			continue
		}
		for _, entry := range m.body {
			if err := recParseEntry(entry, fields); err != nil {
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
		e.freshCopy(s)
		s.blob = []byte(m.blob)
		return s.copy.LoadRecords(s.sc, capacity.Records{Blob: s.blob, Fields: fields})
	}
	s.version = -1
	return fmt.Errorf("%w (read in chunks ten times, written past its log each time)", ErrConflicts)
}

package redisstore

import (
	"context"
	"sync"
)

// maxBatch bounds the operations one script decides, and so how long one
// script holds Redis, which runs one at a time for every client: 32
// bookings take about 3 ms (decision 0007).
const maxBatch = 32

// maxBatchReserves bounds the reserves among them: a reserve that books a
// ticket is the costliest operation (about 70 µs of Redis with 100 to
// 10,000 tickets booked, BenchmarkBookings), and every caller of a busy
// scope books at once when they arrive together, so a batch of 32 bookings
// held Redis for about 2.2 ms of CPU and 6–7 ms of wall time on a loaded
// machine (decision 0007, "Scripts 6.1"). Settles and observes fill the
// rest of a batch.
const maxBatchReserves = 16

// maxReleaseBatch bounds a batch of releases alone, which may hold more:
// a release costs little, and the batch's releases share the retime of
// the first tickets they move (lua/ops.lua). Callers cancelled together (a
// workflow with many calls waiting, a worker stopped) send 64 at a time:
// about 3 ms of Redis each (scripts 5.2 sent 512, when each batch retimed
// every ticket; decision 0007, "Scripts 5.3").
const maxReleaseBatch = 64

// maxBatches bounds the batches of one scope in Redis at once: a batch is
// sent while the previous one is still in Redis, so neither side idles
// through a round trip.
const maxBatches = 2

// Reserves, settles, releases and observations on one scope are decided
// in batches:
// an operation that arrives while its scope's previous batches are in Redis
// waits for one to return and goes with the next (group commit). A lone
// call goes at once; under load a round trip and one read and write of the
// state serve many calls. A second batch joins one already in Redis only once it holds as
// many operations, or when the first returns: a busy scope's batches stay
// large (a script's fixed cost, defining its functions and reading and
// writing the state, is most of the cost of a small one) while Redis still
// has the next batch in hand when one ends. Each operation is still
// decided atomically and in arrival order, as if it ran alone; each call
// takes part in exactly one round trip.

// batcher queues one scope's operations.
type batcher struct {
	mu      sync.Mutex
	pending []*op
	running int
	sent    int // operations of the batch in Redis, when one is (running 1)
}

// ready reports whether pending operations go now. It requires b.mu.
func (b *batcher) ready() bool {
	switch b.running {
	case 0:
		return true
	case maxBatches:
		return false
	}
	return len(b.pending) >= b.sent
}

// op is one queued reserve, settle or observe (lua/ops.lua).
type op struct {
	ctx    context.Context
	code   int    // opReserve, opSettle or opObserve
	call   string // '' for an observe
	fields []any  // the operation's values (wire.go: reserveLayout ...)
	sig    string // a reserve's limits signature, also its last field
	done   chan struct{}

	// Set before done is closed.
	res *reply
	h   header
	err error

	// abandoned is set (under the batcher's lock) by a caller that stopped
	// waiting after its operation was sent; onAbandon then undoes a grant.
	abandoned bool
	onAbandon func(*op)
}

// do runs o in the scope's next batch and waits for its result.
func (s *Store) do(k *scopeKeys, o *op) (*reply, header, error) {
	o.done = make(chan struct{})
	b := &k.batch
	b.mu.Lock()
	b.pending = append(b.pending, o)
	if b.ready() {
		b.running++
		ops := b.take()
		b.mu.Unlock()
		s.runBatch(k, ops)
	} else {
		b.mu.Unlock()
	}
	select {
	case <-o.done:
		return o.res, o.h, o.err
	case <-o.ctx.Done():
	}
	b.mu.Lock()
	for i, p := range b.pending {
		if p == o {
			b.pending = append(b.pending[:i], b.pending[i+1:]...)
			b.mu.Unlock()
			return nil, header{}, o.ctx.Err()
		}
	}
	select {
	case <-o.done:
		b.mu.Unlock()
		return o.res, o.h, o.err
	default:
	}
	o.abandoned = true
	b.mu.Unlock()
	return nil, header{}, o.ctx.Err()
}

// take removes up to maxBatch pending operations, of which up to
// maxBatchReserves reserves, or up to maxReleaseBatch if they are
// releases. It requires b.mu.
func (b *batcher) take() []*op {
	n := 0
	for n < len(b.pending) && n < maxReleaseBatch && b.pending[n].code == opRelease {
		n++
	}
	if n < maxBatch {
		n = 0
		for reserves := 0; n < len(b.pending) && n < maxBatch; n++ {
			if b.pending[n].code == opReserve {
				if reserves == maxBatchReserves {
					break
				}
				reserves++
			}
		}
	}
	ops := make([]*op, n)
	copy(ops, b.pending)
	b.pending = append(b.pending[:0], b.pending[n:]...)
	b.sent = n
	return ops
}

// runBatch sends ops as one script, delivers each result and hands the
// next batch, if any, to a new goroutine.
func (s *Store) runBatch(k *scopeKeys, ops []*op) {
	ctx := context.WithoutCancel(ops[0].ctx)
	r, h, err := s.run(ctx, "batch", s.scripts.ops, k, s.batchArgs(k, ops))
	for _, o := range ops {
		o.h, o.err = h, err
		if err == nil {
			o.res = r.result()
			if r.err != nil {
				o.err = r.err
			}
		}
	}
	b := &k.batch
	b.mu.Lock()
	var abandoned []*op
	for _, o := range ops {
		if o.abandoned {
			abandoned = append(abandoned, o)
		}
		close(o.done)
	}
	var next []*op
	b.running--
	if len(b.pending) > 0 && b.ready() {
		b.running++
		next = b.take()
	}
	b.mu.Unlock()
	for _, o := range abandoned {
		if o.onAbandon != nil && o.err == nil {
			go o.onAbandon(o)
		}
	}
	if next != nil {
		go s.runBatch(k, next)
	}
}

// batchArgs returns the ARGV of the ops script for ops.
func (s *Store) batchArgs(k *scopeKeys, ops []*op) []any {
	// The batch's reserves share the first one's limits signature, sent
	// once; a reserve with other limits sends its own.
	sig := ""
	for _, o := range ops {
		if o.code == opReserve {
			sig = o.sig
			break
		}
	}
	args := s.commonArgs(k, "", "", 2+len(ops)*(2+reserveLayout.size()))
	args = append(args, s.opts.TicketGrace.Microseconds(), sig)
	for _, o := range ops {
		args = append(args, o.code, o.call)
		args = append(args, s.opFields(o)...)
		if o.code == opReserve && o.sig == sig {
			args[len(args)-1] = "" // the batch's
		}
	}
	return args
}

// v3Fields is the number of fields of a reserve and a settle in scripts
// before 4.0, which knew no fairness.
const (
	v3ReserveFields = 16
	v3SettleFields  = 10
)

// opFields returns o's fields as the store's scripts read them: with
// v3Ops (a test of a rolling deploy running the previous scripts), in the
// layout of scripts 3.x, which ends a reserve with its signature.
func (s *Store) opFields(o *op) []any {
	if !s.v3Ops {
		return o.fields
	}
	switch o.code {
	case opReserve:
		return append(append([]any{}, o.fields[:v3ReserveFields-1]...), o.fields[len(o.fields)-1])
	case opSettle:
		return o.fields[:v3SettleFields]
	}
	return o.fields
}

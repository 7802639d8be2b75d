package capacity_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	"github.com/tollgate-dev/tollgate/capacity/storetest"
)

// replicatedStore keeps one scope in two MemoryStores, as a shared store
// that decides in Go would: the records live in one place (all, as Redis
// would hold them), each operation runs on a copy that first applies the
// changes it missed (log), and its changes are then written to all. A
// drawn share of the operations first run on a copy that missed changes
// and are refused, as a compare-and-set on a version refuses them: the
// copy then takes what it missed and, for each record it changed, the
// record as all holds it, and runs the operation again.
type replicatedStore struct {
	t      require.TestingT
	draw   func(n int, label string) int // a number in [0, n)
	copies [2]*capacity.MemoryStore
	seen   [2]int // the changes of log each copy applied
	log    []capacity.ScopeRecords
	all    capacity.ScopeRecords
	// checkEvery compares the records after every operation (true unless a
	// test turns it off), else only at check.
	checkEvery bool
	last       int // the copy that ran the last operation
}

// newReplicatedStore returns a store whose operations run on the copies
// draw picks; rapidDraws(t) draws them in a property test.
func newReplicatedStore(t require.TestingT, draw func(n int, label string) int, clock *capacitytest.ManualClock) *replicatedStore {
	r := &replicatedStore{t: t, draw: draw, checkEvery: true}
	for i := range r.copies {
		r.copies[i] = capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
		capacity.TrackRecords(r.copies[i], propScope)
	}
	r.all = capacity.AllRecords(r.copies[0], propScope)
	return r
}

func rapidDraws(t *rapid.T) func(n int, label string) int {
	return func(n int, label string) int { return rapid.IntRange(0, n-1).Draw(t, label) }
}

// catchUp applies to copy i the changes it missed.
func (r *replicatedStore) catchUp(i int) {
	for _, ch := range r.log[r.seen[i]:] {
		capacity.ApplyRecords(r.copies[i], propScope, ch)
	}
	r.seen[i] = len(r.log)
}

// run runs op on a copy drawn and writes what it changed.
func (r *replicatedStore) run(op func(s *capacity.MemoryStore) error) error {
	i := r.draw(2, "copy")
	s := r.copies[i]
	if r.seen[i] < len(r.log) && r.draw(4, "refused") == 0 {
		_ = op(s) // decided on missed changes: refused, its answer never told
		changed := capacity.ChangedRecords(s, propScope)
		r.catchUp(i)
		capacity.ApplyRecords(s, propScope, capacity.RecordsAt(r.all, changed))
		require.Equal(r.t, capacity.AsLoaded(r.all), capacity.AllRecords(s, propScope), "a copy that applied what it missed and the records it changed")
	}
	r.catchUp(i)
	err := op(s)
	ch, decodeErr := capacity.ThroughCodec(propScope, capacity.ChangedRecords(s, propScope))
	require.NoError(r.t, decodeErr)
	capacity.MergeRecords(&r.all, ch)
	r.log = append(r.log, ch)
	r.seen[i], r.last = len(r.log), i
	if r.checkEvery {
		r.check()
	}
	return err
}

// check requires the copy that ran the last operation to hold the records
// written, and the other to hold them too once it applies what it missed.
func (r *replicatedStore) check() {
	want := capacity.AsLoaded(r.all)
	require.Equal(r.t, want, capacity.AllRecords(r.copies[r.last], propScope), "the records written and the copy that wrote them")
	other := 1 - r.last
	r.catchUp(other)
	require.Equal(r.t, want, capacity.AllRecords(r.copies[other], propScope), "the records written and a copy that applied them")
}

func (r *replicatedStore) Reserve(ctx context.Context, req capacity.Request) (res capacity.Reservation, err error) {
	err = r.run(func(s *capacity.MemoryStore) (err error) {
		res, err = s.Reserve(ctx, req)
		return err
	})
	return res, err
}

func (r *replicatedStore) Settle(ctx context.Context, le capacity.Lease, final capacity.Charges) error {
	return r.run(func(s *capacity.MemoryStore) error { return s.Settle(ctx, le, final) })
}

func (r *replicatedStore) Release(ctx context.Context, le capacity.Lease) error {
	return r.run(func(s *capacity.MemoryStore) error { return s.Release(ctx, le) })
}

func (r *replicatedStore) Observe(ctx context.Context, sc capacity.Scope, o capacity.Observation) error {
	return r.run(func(s *capacity.MemoryStore) error { return s.Observe(ctx, sc, o) })
}

func (r *replicatedStore) Snapshot(ctx context.Context, sc capacity.Scope) (snap capacity.Snapshot, err error) {
	err = r.run(func(s *capacity.MemoryStore) (err error) {
		snap, err = s.Snapshot(ctx, sc)
		return err
	})
	return snap, err
}

// TestRecordsKeepOneScope runs the conformance model on one scope kept in
// two copies that exchange only the records they changed: after every
// operation the copy that made it holds exactly the records written, a
// copy refused for deciding on missed changes recovers them from the
// records it changed, and the budget invariants hold across both.
func TestRecordsKeepOneScope(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clock := capacitytest.NewManualClock(storetest.Epoch)
		m := newPropModel(t, clock, newReplicatedStore(t, rapidDraws(t), clock))
		t.Repeat(m.actions())
		m.ledger.check(t, m.limits)
	})
}

func (r *replicatedStore) Renew(ctx context.Context, le capacity.Lease, ttl time.Duration) (out capacity.Lease, err error) {
	err = r.run(func(s *capacity.MemoryStore) (err error) {
		out, err = s.Renew(ctx, le, ttl)
		return err
	})
	return out, err
}

func (r *replicatedStore) AddFailure(ctx context.Context, sc capacity.Scope, call string, ttl time.Duration) (n int, err error) {
	err = r.run(func(s *capacity.MemoryStore) (err error) {
		n, err = s.AddFailure(ctx, sc, call, ttl)
		return err
	})
	return n, err
}

func (r *replicatedStore) Block(ctx context.Context, sc capacity.Scope, b capacity.Block) error {
	return r.run(func(s *capacity.MemoryStore) error { return s.Block(ctx, sc, b) })
}

// TestRecordsFollowEveryOperation drives one scope kept in two copies
// through every operation on a scope, with many calls in flight (the live
// sums), key caps, renewals, failures, blocks and long pauses (lapsed
// leases forgotten): after every operation the copy that made it holds
// exactly the records written.
func TestRecordsFollowEveryOperation(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		clock := capacitytest.NewManualClock(storetest.Epoch)
		store := newReplicatedStore(t, rapidDraws(t), clock)
		limits := capacity.Limits{
			RequestsPerMinute: rapid.Int64Range(60, 6000).Draw(t, "rpm"),
			TokensPerMinute:   rapid.Int64Range(10_000, 1_000_000).Draw(t, "tpm"),
			TokensPerDay:      rapid.Int64Range(0, 10_000_000).Draw(t, "tpd"),
			MaxInFlight:       rapid.Int64Range(0, 64).Draw(t, "in-flight"),
		}
		var live []capacity.Lease
		calls := 0
		t.Repeat(map[string]func(*rapid.T){
			"reserve": func(t *rapid.T) {
				for range rapid.IntRange(1, 24).Draw(t, "calls") {
					call := calls + 1
					if calls > 0 && rapid.IntRange(0, 3).Draw(t, "again") == 0 {
						call = rapid.IntRange(1, calls).Draw(t, "call") // its lease may have lapsed
					}
					calls = max(calls, call)
					req := capacity.Request{
						Scope: propScope, Limits: limits, Call: fmt.Sprintf("c%d", call), Attempt: 1,
						Charges: capacity.Charges{capacity.Requests: 1, capacity.InputTokens: rapid.Int64Range(1, 4000).Draw(t, "in"),
							capacity.Tokens: 5000, capacity.InFlight: 1},
						Book:  rapid.Bool().Draw(t, "book"),
						Class: capacity.Class(rapid.IntRange(0, 2).Draw(t, "class")),
						TTL:   time.Duration(rapid.IntRange(1, 120).Draw(t, "ttl-s")) * time.Second,
					}
					req.Charges[capacity.Tokens] = req.Charges[capacity.InputTokens] + 1000
					if key := rapid.IntRange(-1, 40).Draw(t, "key"); key >= 0 {
						req.Fairness = capacity.Fairness{Key: fmt.Sprintf("tenant-%d", key), Share: []float64{0, 0.5}[key%2]}
					}
					res, err := store.Reserve(ctx, req)
					if err == nil && res.Granted {
						live = append(live, res.Lease)
					}
				}
			},
			"settle": func(t *rapid.T) {
				if len(live) == 0 {
					t.Skip()
				}
				i := rapid.IntRange(0, len(live)-1).Draw(t, "lease")
				final := live[i].Charges
				final[capacity.Tokens] = rapid.Int64Range(0, 2*final[capacity.Tokens]).Draw(t, "final")
				_ = store.Settle(ctx, live[i], final)
				live = append(live[:i], live[i+1:]...)
			},
			"release": func(t *rapid.T) {
				if len(live) == 0 {
					t.Skip()
				}
				i := rapid.IntRange(0, len(live)-1).Draw(t, "lease")
				_ = store.Release(ctx, live[i])
				live = append(live[:i], live[i+1:]...)
			},
			"renew": func(t *rapid.T) {
				if len(live) == 0 {
					t.Skip()
				}
				i := rapid.IntRange(0, len(live)-1).Draw(t, "lease")
				if le, err := store.Renew(ctx, live[i], time.Minute); err == nil {
					live[i] = le
				}
			},
			"fail": func(t *rapid.T) {
				_, err := store.AddFailure(ctx, propScope, fmt.Sprintf("c%d", rapid.IntRange(0, calls).Draw(t, "call")), time.Minute)
				require.NoError(t, err)
			},
			"observe": func(t *rapid.T) {
				var o capacity.Observation
				d := capacity.Dimension(rapid.IntRange(0, 3).Draw(t, "dim"))
				o.Dims[d] = capacity.DimensionObservation{HasRemaining: true, Remaining: rapid.Int64Range(0, 100_000).Draw(t, "remaining"),
					HasLimit: rapid.Bool().Draw(t, "has-limit"), Limit: rapid.Int64Range(1, 1_000_000).Draw(t, "limit")}
				if len(live) > 0 {
					o.Mark = live[rapid.IntRange(0, len(live)-1).Draw(t, "mark")].Mark
				}
				_ = store.Observe(ctx, propScope, o)
			},
			"block": func(t *rapid.T) {
				b := capacity.Block{Reason: capacity.Cooldown, Until: clock.Now().Add(time.Duration(rapid.IntRange(1, 30).Draw(t, "block-s")) * time.Second)}
				require.NoError(t, store.Block(ctx, propScope, b))
			},
			"advance": func(t *rapid.T) {
				clock.Advance(time.Duration(rapid.Int64Range(1, 5000).Draw(t, "ms")) * time.Millisecond)
			},
			"pause": func(t *rapid.T) { // leases expire, lapsed leases are forgotten
				clock.Advance(time.Duration(rapid.IntRange(1, 15).Draw(t, "minutes")) * time.Minute)
			},
		})
	})
}

// TestRecordsForgetIdleFlows keeps more flows than a scope remembers idle
// (MaxIdleFlows), then lets one key run ahead of the others, so that each
// call it places forgets flows: the records follow the flows forgotten and
// their places in the scan.
func TestRecordsForgetIdleFlows(t *testing.T) {
	ctx := context.Background()
	clock := capacitytest.NewManualClock(storetest.Epoch)
	rng := rand.New(rand.NewPCG(1, 2))
	store := newReplicatedStore(t, func(n int, _ string) int { return rng.IntN(n) }, clock)
	store.checkEvery = false
	limits := capacity.Limits{RequestsPerMinute: 1_000_000}
	reserve := func(call int, key string) {
		req := capacity.Request{Scope: propScope, Limits: limits, Call: fmt.Sprintf("c%d", call), Attempt: 1,
			Charges: capacity.Charges{capacity.Requests: 1}, TTL: time.Minute, Fairness: capacity.Fairness{Key: key}}
		res, err := store.Reserve(ctx, req)
		require.NoError(t, err)
		require.True(t, res.Granted)
		if rng.IntN(4) > 0 {
			require.NoError(t, store.Settle(ctx, res.Lease, res.Lease.Charges))
		}
		clock.Advance(time.Millisecond)
	}
	for i := range 1100 {
		reserve(i, fmt.Sprintf("tenant-%d", i))
	}
	store.check()
	for i := range 200 {
		reserve(1100+2*i, "tenant-0")
		reserve(1100+2*i+1, fmt.Sprintf("tenant-%d", 1100+i))
		if i%50 == 49 {
			store.check()
		}
	}
	require.Less(t, capacity.AllRecords(store.copies[0], propScope).Flows(), 1100, "no flow forgotten")
}

// TestLoadRecordsFollowsAnotherStore keeps a scope of one MemoryStore in
// another through the exported, encoded records: the one that loads what
// the other took holds the same records; a record that does not decode is
// refused with ErrBadRecord and changes nothing.
func TestLoadRecordsFollowsAnotherStore(t *testing.T) {
	ctx := context.Background()
	clock := capacitytest.NewManualClock(storetest.Epoch)
	a := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
	b := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
	a.TrackRecords(propScope)
	b.TrackRecords(propScope)
	lim := capacity.Limits{RequestsPerMinute: 60, TokensPerMinute: 100_000}
	var live []capacity.Lease
	for i := range 40 {
		res, err := a.Reserve(ctx, capacity.Request{Scope: propScope, Limits: lim, Call: fmt.Sprintf("c%d", i), Attempt: 1,
			Charges: capacity.Charges{capacity.Requests: 1, capacity.Tokens: 900, capacity.InFlight: 1}, Book: true,
			TTL: time.Minute, Fairness: capacity.Fairness{Key: fmt.Sprintf("tenant-%d", i%3)}})
		require.NoError(t, err)
		if res.Granted {
			live = append(live, res.Lease)
		}
		if i%7 == 6 && len(live) > 0 {
			require.NoError(t, a.Settle(ctx, live[0], capacity.Charges{capacity.Requests: 1, capacity.Tokens: 300}))
			live = live[1:]
		}
		clock.Advance(300 * time.Millisecond)
		require.NoError(t, b.LoadRecords(propScope, a.TakeRecords(propScope)))
		require.Equal(t, a.ScopeRecords(propScope), b.ScopeRecords(propScope), "after call %d", i)
	}
	snapA, err := a.Snapshot(ctx, propScope)
	require.NoError(t, err)
	snapB, err := b.Snapshot(ctx, propScope)
	require.NoError(t, err)
	require.Equal(t, snapA, snapB)

	before := b.ScopeRecords(propScope)
	bad := a.TakeRecords(propScope)
	bad.Fields["lc0"] = []byte{1, 2}
	require.ErrorIs(t, b.LoadRecords(propScope, bad), capacity.ErrBadRecord)
	require.Equal(t, before, b.ScopeRecords(propScope))
}

// TestRecordsCarryTheCredentialBlock blocks a credential in one store and
// loads the scope's records into another: the other's sibling scope on
// the credential is blocked too, and the half-open probe it claims comes
// back in its records.
func TestRecordsCarryTheCredentialBlock(t *testing.T) {
	ctx := context.Background()
	clock := capacitytest.NewManualClock(storetest.Epoch)
	a := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
	b := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
	a.TrackRecords(propScope)
	b.TrackRecords(propScope)
	until := clock.Now().Add(time.Minute)
	require.NoError(t, a.Block(ctx, propScope, capacity.Block{Reason: capacity.CredentialDisabled, Until: until, Credential: true, HalfOpen: 10 * time.Second}))
	rec := a.TakeRecords(propScope)
	require.NotNil(t, rec.Fields[capacity.CredentialRecord])
	require.NoError(t, b.LoadRecords(propScope, rec))

	sibling := propScope
	sibling.LimitGroup = "claude-haiku-4-5"
	req := capacity.Request{Scope: sibling, Limits: capacity.Limits{RequestsPerMinute: 60}, Call: "c1", Attempt: 1, Charges: capacity.Charges{capacity.Requests: 1}}
	res, err := b.Reserve(ctx, req)
	require.NoError(t, err)
	require.False(t, res.Granted, "the sibling of a blocked credential")

	clock.Set(until)
	req.Scope = propScope
	res, err = b.Reserve(ctx, req)
	require.NoError(t, err)
	require.True(t, res.Probe, "the first call after the block is the probe")
	probing := b.TakeRecords(propScope)
	require.NotNil(t, probing.Fields[capacity.CredentialRecord])
	require.NoError(t, a.LoadRecords(propScope, probing))
	req.Call = "c2"
	res, err = a.Reserve(ctx, req)
	require.NoError(t, err)
	require.False(t, res.Granted, "a second call while the probe is out")

	require.NoError(t, b.Unblock(ctx, propScope, true))
	cred, ok := b.TakeRecords(propScope).Fields[capacity.CredentialRecord]
	require.True(t, ok, "an unblocked credential's record changed")
	require.Nil(t, cred, "an unblocked credential's record deleted")
}

// TestRecordsAnnounceTicketsBroughtForward refunds a call's tokens ahead
// of booked tickets: the records taken name the calls whose tickets came
// forward, and Wake wakes such a call where it waits.
func TestRecordsAnnounceTicketsBroughtForward(t *testing.T) {
	ctx := context.Background()
	clock := capacitytest.NewManualClock(storetest.Epoch)
	a := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
	b := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
	a.TrackRecords(propScope)
	b.TrackRecords(propScope)
	lim := capacity.Limits{RequestsPerMinute: 6000, TokensPerMinute: 6000}
	req := func(i int) capacity.Request {
		return capacity.Request{Scope: propScope, Limits: lim, Call: fmt.Sprintf("c%d", i), Attempt: 1, Book: true,
			Charges: capacity.Charges{capacity.Requests: 1, capacity.Tokens: 500}, TTL: time.Minute}
	}
	first, err := a.Reserve(ctx, req(0))
	require.NoError(t, err)
	require.True(t, first.Granted)
	for i := 1; i <= 3; i++ {
		res, err := a.Reserve(ctx, req(i))
		require.NoError(t, err)
		require.True(t, res.Booked)
	}
	require.Empty(t, a.TakeRecords(propScope).Announced)
	require.NoError(t, b.LoadRecords(propScope, a.ScopeRecords(propScope)))
	due, stop := b.TicketDue(propScope, "c3")
	defer stop()

	require.NoError(t, a.Settle(ctx, first.Lease, capacity.Charges{capacity.Requests: 1}))
	announced := a.TakeRecords(propScope).Announced
	require.Contains(t, announced, "c3")
	b.Wake(propScope, false, announced)
	select {
	case <-due:
	default:
		t.Fatal("the call whose ticket came forward was not woken")
	}
}

// TestRecordsRestAt checks when a scope's records say its state stops
// mattering, after each kind of thing that keeps it.
func TestRecordsRestAt(t *testing.T) {
	ctx := context.Background()
	lim := capacity.Limits{RequestsPerMinute: 60, TokensPerMinute: 60_000} // 1 request/s, bucket 5 s
	call := func(i int, c capacity.Charges) capacity.Request {
		return capacity.Request{Scope: propScope, Limits: lim, Call: fmt.Sprintf("c%d", i), Attempt: 1, Charges: c, TTL: 100 * time.Millisecond}
	}
	dayEnd := storetest.Epoch.Add(24 * time.Hour).Truncate(24 * time.Hour).Sub(storetest.Epoch)
	one := capacity.Charges{capacity.Requests: 1}
	for _, tc := range []struct {
		name string
		do   func(s *capacity.MemoryStore, clock *capacitytest.ManualClock)
		want time.Duration // after the last operation
	}{
		{"a bucket drained by a call settled at once refills", func(s *capacity.MemoryStore, _ *capacitytest.ManualClock) {
			res, err := s.Reserve(ctx, call(0, one))
			require.NoError(t, err)
			require.NoError(t, s.Settle(ctx, res.Lease, one))
		}, seconds(1 / 0.95)},
		{"a lease in flight lives until it expires", func(s *capacity.MemoryStore, _ *capacitytest.ManualClock) {
			req := call(0, one)
			req.TTL = 30 * time.Second
			_, err := s.Reserve(ctx, req)
			require.NoError(t, err)
		}, 30 * time.Second},
		{"a daily budget counts until the day ends", func(s *capacity.MemoryStore, clock *capacitytest.ManualClock) {
			day := lim
			day.RequestsPerDay = 1000
			perDay := capacity.Charges{capacity.Requests: 1, capacity.RequestsPerDay: 1}
			req := call(0, perDay)
			req.Limits = day
			res, err := s.Reserve(ctx, req)
			require.NoError(t, err)
			require.NoError(t, s.Settle(ctx, res.Lease, perDay))
		}, dayEnd},
		{"a block lasts until it ends", func(s *capacity.MemoryStore, clock *capacitytest.ManualClock) {
			_, err := s.Reserve(ctx, call(0, capacity.Charges{}))
			require.NoError(t, err)
			require.NoError(t, s.Block(ctx, propScope, capacity.Block{Reason: capacity.QuotaExhausted, Until: clock.Now().Add(time.Hour)}))
		}, time.Hour},
		{"a half-open block is kept a day past its half-open time", func(s *capacity.MemoryStore, clock *capacitytest.ManualClock) {
			_, err := s.Reserve(ctx, call(0, capacity.Charges{}))
			require.NoError(t, err)
			require.NoError(t, s.Block(ctx, propScope, capacity.Block{Reason: capacity.CredentialDisabled, Until: clock.Now().Add(time.Minute), HalfOpen: 10 * time.Second}))
		}, time.Minute + 10*time.Second + 24*time.Hour},
		{"a key's share refills", func(s *capacity.MemoryStore, _ *capacitytest.ManualClock) {
			req := call(0, capacity.Charges{capacity.Requests: 1})
			req.Fairness = capacity.Fairness{Key: "tenant", Share: 0.5}
			res, err := s.Reserve(ctx, req)
			require.NoError(t, err)
			require.NoError(t, s.Settle(ctx, res.Lease, req.Charges))
		}, seconds(1 / (0.5 * 0.95))}, // half of the scope's 0.95 requests a second
		{"a key's day counter counts until its day ends", func(s *capacity.MemoryStore, _ *capacitytest.ManualClock) {
			req := call(0, capacity.Charges{capacity.Tokens: 4000})
			req.Fairness = capacity.Fairness{Key: "tenant", TokensPerDay: 100_000}
			res, err := s.Reserve(ctx, req)
			require.NoError(t, err)
			require.NoError(t, s.Settle(ctx, res.Lease, req.Charges))
		}, dayEnd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := capacitytest.NewManualClock(storetest.Epoch)
			s := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
			s.TrackRecords(propScope)
			tc.do(s, clock)
			got := s.ScopeRecords(propScope).RestsAt.Sub(clock.Now())
			require.InDelta(t, tc.want.Seconds(), got.Seconds(), 0.01, "rests %v after, want %v", got, tc.want)
			require.Equal(t, s.ScopeRecords(propScope).RestsAt, s.TakeRecords(propScope).RestsAt)
		})
	}
}

// seconds returns f seconds.
func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// TestRecordsSayUntilWhenCallsWait denies a call for a slot and books
// another behind the bucket: the records say until when a release may
// let a call go (the first's time), not the booked one's.
func TestRecordsSayUntilWhenCallsWait(t *testing.T) {
	ctx := context.Background()
	clock := capacitytest.NewManualClock(storetest.Epoch)
	s := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
	s.TrackRecords(propScope)
	lim := capacity.Limits{RequestsPerMinute: 60, MaxInFlight: 1}
	req := func(i int, book bool) capacity.Request {
		return capacity.Request{Scope: propScope, Limits: lim, Call: fmt.Sprintf("c%d", i), Attempt: 1, Book: book,
			Charges: capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}, TTL: time.Minute}
	}
	held, err := s.Reserve(ctx, req(0, false))
	require.NoError(t, err)
	require.True(t, held.Granted)
	require.True(t, s.TakeRecords(propScope).WaitersUntil.IsZero(), "no call denied yet")
	slot, err := s.Reserve(ctx, req(1, false))
	require.NoError(t, err)
	require.False(t, slot.Granted)
	require.Equal(t, slot.RetryAt, s.TakeRecords(propScope).WaitersUntil)

	lim.MaxInFlight = 0
	lim.RequestsPerMinute = 6 // one every 10 s
	require.NoError(t, s.Settle(ctx, held.Lease, held.Lease.Charges))
	clock.Advance(time.Minute)
	booked := 0
	for i := 2; i < 6; i++ {
		res, err := s.Reserve(ctx, req(i, true))
		require.NoError(t, err)
		if !res.Granted {
			require.True(t, res.Booked)
			booked++
			require.True(t, s.TakeRecords(propScope).WaitersUntil.Before(res.RetryAt), "a booked call comes at its time")
		}
	}
	require.Positive(t, booked)
}

// TestRecordsSayWhenCapacityCameBack: TakeRecords reports Released after
// a settle, a release, an expiry reclaimed and a lifted block, and not
// after a grant, nor after loading another copy's records.
func TestRecordsSayWhenCapacityCameBack(t *testing.T) {
	ctx := context.Background()
	clock := capacitytest.NewManualClock(storetest.Epoch)
	s := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
	s.TrackRecords(propScope)
	lim := capacity.Limits{RequestsPerMinute: 600, MaxInFlight: 1}
	reserve := func(call string) capacity.Reservation {
		res, err := s.Reserve(ctx, capacity.Request{Scope: propScope, Limits: lim, Call: call, Attempt: 1,
			Charges: capacity.Charges{capacity.Requests: 1, capacity.InFlight: 1}, TTL: time.Second})
		require.NoError(t, err)
		require.True(t, res.Granted)
		return res
	}
	released := func() bool { return s.TakeRecords(propScope).Released }

	held := reserve("a")
	require.False(t, released(), "a grant releases nothing")
	require.NoError(t, s.Settle(ctx, held.Lease, held.Lease.Charges))
	require.True(t, released(), "settled")
	require.False(t, released(), "taken once")
	held = reserve("b")
	require.NoError(t, s.Release(ctx, held.Lease))
	require.True(t, released(), "released")
	reserve("c")
	clock.Advance(2 * time.Second)
	reserve("d") // reclaims c's expired lease first
	require.True(t, released(), "an expired lease reclaimed")
	require.NoError(t, s.Block(ctx, propScope, capacity.Block{Reason: capacity.Cooldown, Until: clock.Now().Add(time.Minute)}))
	require.False(t, released())
	require.NoError(t, s.Unblock(ctx, propScope, false))
	require.True(t, released(), "a lifted block")

	other := capacity.NewMemoryStore(capacity.MemoryOptions{Clock: clock})
	other.TrackRecords(propScope)
	require.NoError(t, other.LoadRecords(propScope, s.ScopeRecords(propScope)))
	require.False(t, other.TakeRecords(propScope).Released, "loading another copy's records releases nothing here")
}

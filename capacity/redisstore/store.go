package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Store is a capacity.Store held in Redis: every worker on every machine that
// uses the same Redis and prefix shares one budget per scope. Each operation
// is decided by one Lua script in one round trip (concurrent reserves and
// settles on a scope share theirs), atomically over every dimension of the
// scope. It implements capacity.Notifier with sharded pub/sub.
//
// A Store is safe for concurrent use. Close it to end its subscriptions; it
// never closes the client.
type Store struct {
	rdb  redis.UniversalClient
	opts Options
	id   string // this instance, in release messages, so it ignores its own
	// scripts are the Lua scripts it runs: this version's (tests of
	// upgrades run an earlier version's).
	scripts *scripts
	// functions is its use of the scripts' function library.
	functions functions
	// v3Ops sends operations in the layout of scripts 3.x (tests of a
	// rolling deploy that run those scripts: the previous worker's Go).
	v3Ops bool
	// local, if set, is this worker's clock where it differs from the
	// store's (tests of clock skew); else opts.Clock or the system clock.
	local capacity.Clock

	keyCache   scopeMap[*scopeKeys]
	limitCache sync.Map // capacity.Limits -> signature
	sigCache   sync.Map // signature -> capacity.Limits
	dayCache   sync.Map // scope key -> capacity.DayBoundary, from Reserve
	epochs     sync.Map // credential key -> epoch token last seen

	notify   *notifier
	fallback *fallback  // nil with FailClosed
	rec      *recEngine // for the scopes the records engine holds

	downUntil atomic.Int64          // unix nanoseconds; Redis is skipped until then
	lastErr   atomic.Pointer[error] // why Redis was last found unreachable

	resets      atomic.Int64
	unavailable atomic.Int64
	// reclaimRounds counts the scripts that only reclaimed (runWith).
	reclaimRounds atomic.Int64
}

var (
	_ capacity.Store          = (*Store)(nil)
	_ capacity.Notifier       = (*Store)(nil)
	_ capacity.TicketNotifier = (*Store)(nil)
)

// New returns a Store on rdb (a *redis.Client, *redis.ClusterClient, a
// Sentinel failover client or a *redis.Ring). It does not contact Redis.
func New(rdb redis.UniversalClient, opts Options) (*Store, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidOptions)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("redisstore: instance id: %w", err)
	}
	s := &Store{rdb: rdb, opts: o, id: hex.EncodeToString(id[:]), scripts: current}
	s.notify = newNotifier(s)
	if o.OnUnavailable == FallbackLocal {
		s.fallback = newFallback(o)
	}
	s.rec = newRecEngine(s)
	if o.Engine == EngineRecords {
		s.notify.perRelease = recWakePerRelease // one batch decides them
	}
	return s, nil
}

// Close ends the store's subscriptions and wakes every local waiter. The
// client stays open. Using the store after Close is allowed; it no longer
// announces releases from other workers.
func (s *Store) Close() error {
	s.notify.close()
	return nil
}

// Stats are counters of one Store instance.
type Stats struct {
	// Resets counts the times this instance found a credential's state lost
	// (Redis restarted without persistence, failed over, or evicted it).
	Resets int64
	// Unavailable counts operations that found Redis unreachable.
	Unavailable int64
	// FallbackLeases is the number of live leases granted by the local
	// fallback budget.
	FallbackLeases int
	// ReclaimScripts counts the scripts sent again because they only
	// reclaimed: more leases had expired, or tickets lapsed, at once than
	// one script reclaims (64), as after a worker that held them crashed.
	ReclaimScripts int64
	// Writes counts the batches whose records this instance wrote
	// (EngineRecords), Conflicts those it decided again because another
	// worker had written first, and Reloads the copies of a scope it read
	// whole.
	Writes, Conflicts, Reloads int64
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	st := Stats{Resets: s.resets.Load(), Unavailable: s.unavailable.Load(), ReclaimScripts: s.reclaimRounds.Load()}
	if s.fallback != nil {
		st.FallbackLeases = s.fallback.live()
	}
	st.Writes, st.Conflicts, st.Reloads = s.rec.writes.Load(), s.rec.conflicts.Load(), s.rec.reloads.Load()
	return st
}

// now returns the clock argument of a script: empty for Redis TIME.
func (s *Store) nowArg() string {
	if s.opts.Clock == nil {
		return ""
	}
	return strconv.FormatInt(s.opts.Clock.Now().UnixMicro(), 10)
}

// localNow is the best local guess of the store's clock, for computing day
// boundaries.
func (s *Store) localNow() time.Time {
	if s.local != nil {
		return s.local.Now()
	}
	if s.opts.Clock != nil {
		return s.opts.Clock.Now()
	}
	return time.Now()
}

// bounds returns the next two day boundaries of db around now, for a script
// to roll the day window: the first boundary after an hour ago and the one
// after it, so a Redis clock an hour off either way still finds its next one.
// They are kept per scope until the first one is an hour past.
func (s *Store) bounds(k *scopeKeys, db capacity.DayBoundary) (int64, int64) {
	now := s.localNow()
	if c := k.day.Load(); c != nil && c.db == db && !now.Before(c.from) && now.Add(-time.Hour).Before(c.b1) {
		return c.us1, c.us2
	}
	b1 := db.Next(now.Add(-time.Hour))
	c := &dayBounds{db: db, from: now, b1: b1, us1: ceilMicros(b1), us2: ceilMicros(db.Next(b1))}
	k.day.Store(c)
	return c.us1, c.us2
}

// dayBounds are a scope's day boundaries as computed at from: valid until
// b1 is an hour past (or the clock goes back).
type dayBounds struct {
	db       capacity.DayBoundary
	from, b1 time.Time
	us1, us2 int64
}

// knownBounds returns bounds for sc's day boundary if this store has seen it
// (from a Reserve), else empty arguments: the window then rolls and its end
// is set by the next Reserve.
func (s *Store) knownBounds(k *scopeKeys) (any, any) {
	v, ok := s.dayCache.Load(k.scopeKey)
	if !ok {
		return "", ""
	}
	b1, b2 := s.bounds(k, v.(capacity.DayBoundary))
	return b1, b2
}

// knownBoundsMicros is knownBounds with 0 for unknown, as the scripts read
// an empty bound.
func (s *Store) knownBoundsMicros(k *scopeKeys) (int64, int64) {
	v, ok := s.dayCache.Load(k.scopeKey)
	if !ok {
		return 0, 0
	}
	return s.bounds(k, v.(capacity.DayBoundary))
}

// commonArgs returns ARGV[1..5] of a scope script.
func (s *Store) commonArgs(k *scopeKeys, b1, b2 any, extra int) []any {
	args := make([]any, 0, 5+extra)
	return append(args, s.nowArg(), s.id, k.channel, b1, b2)
}

// run runs sc on the scope's keys and checks its reply header. It
// returns the reply positioned after the header.
func (s *Store) run(ctx context.Context, op string, sc *script, k *scopeKeys, args []any) (*reply, header, error) {
	return s.runWith(ctx, op, sc, false, k, args)
}

// runWith is run, read-only if ro (for a script that writes nothing).
//
// A script that found more leases expired, or tickets lapsed, than one
// script reclaims (tuning.MaxReclaim: a worker that held many crashed)
// reclaims that many, decides nothing and replies with kind "A"; runWith
// sends it again until it decides, so that no script walks them all.
func (s *Store) runWith(ctx context.Context, op string, sc *script, ro bool, k *scopeKeys, args []any) (*reply, header, error) {
	for range maxReclaimRounds {
		v, err := s.call(ctx, sc, k.keys, args, ro).Result()
		if err != nil {
			return nil, header{}, s.failed(ctx, op, err)
		}
		s.up()
		r, err := newReply(op, v)
		if err != nil {
			return nil, header{}, err
		}
		h := r.header()
		if r.err != nil {
			return nil, header{}, r.err
		}
		s.noteEpoch(k, h)
		if h.freed > 0 {
			s.notify.wake(k.scopeKey, 1)
		}
		if h.kind != "A" {
			return r, h, nil
		}
		s.reclaimRounds.Add(1)
	}
	return nil, header{}, fmt.Errorf("redisstore: %s on scope %s: still reclaiming expired leases and tickets after %d scripts", op, k.scopeKey, maxReclaimRounds)
}

// maxReclaimRounds bounds the scripts one operation sends while they
// reclaim (runWith): each reclaims tuning.MaxReclaim leases and as many
// tickets, so it is reached only if a script stopped making progress.
const maxReclaimRounds = 100_000

// call runs sc on keys with args (functions.call).
func (s *Store) call(ctx context.Context, sc *script, keys []string, args []any, ro bool) *redis.Cmd {
	return s.functions.call(ctx, s.rdb, s.scripts.library, sc, keys, args, ro)
}

// header is what every scope script reply begins with.
type header struct {
	kind  string
	now   time.Time
	epoch string
	reset bool
	freed int64
}

func (r *reply) header() header {
	return header{kind: r.str(), now: r.time(), epoch: r.str(), reset: r.int() == 1, freed: r.int()}
}

// noteEpoch counts a change of a credential's epoch seen by this instance:
// its state was lost and budgets restarted at the burst level. Each change
// counts once. The first epoch seen is not a change, and neither is a
// reply that says it created the epoch this instance already knows: two
// operations crossed, and the other's reply was read first.
func (s *Store) noteEpoch(k *scopeKeys, h header) {
	if h.epoch == "" {
		return // a read-only script on a credential without an epoch yet
	}
	prev, loaded := s.epochs.LoadOrStore(k.credKey, h.epoch)
	if !loaded || prev.(string) == h.epoch || !s.epochs.CompareAndSwap(k.credKey, prev, h.epoch) {
		return
	}
	s.resets.Add(1)
	if l := s.opts.Logger; l != nil {
		l.Warn("tollgate: Redis state of a credential was lost; its budgets restart at the burst level",
			"credential", k.credKey, "scope", k.scopeKey)
	}
	s.notify.wakeCredential(k.credKey)
}

// ceilMicros returns t in unix microseconds, rounded up.
func ceilMicros(t time.Time) int64 {
	us := t.UnixMicro()
	if t.Nanosecond()%1000 != 0 {
		us++
	}
	return us
}

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

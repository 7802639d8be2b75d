package activities_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/activity"

	"github.com/tollgate-dev/tollgate/capacity"
)

// grantLog is a memory store that records, on its own clock, every lease
// it grants and every cooldown the gate sets, each with the activity
// attempt that asked (read from the call's context). Tests assert on this
// record, never on gaps measured on a loaded machine: a call granted before
// a 429 may reach the provider late, but the store's grant times and the
// times it set its cooldowns are decided under its lock, in one order.
// Embedding the store keeps its optional interfaces (Notifier,
// TicketNotifier, Learner, ...), so the gate runs as with the bare store.
type grantLog struct {
	*capacity.MemoryStore
	mu        sync.Mutex
	grants    []grantRec
	cooldowns []cooldownRec
	limits    []limitRec
	// onGrant, if set, runs on every grant before Reserve returns it (so
	// before the call can be sent), with the attempt's number.
	onGrant func(attempt int32)
}

// limitRec is the first observation of a scope that reported a token
// limit other than the one before: At is the store's clock, read after
// the store applied it.
type limitRec struct {
	Scope capacity.Scope
	Limit int64
	At    time.Time
}

// grantRec is one granted Reserve.
type grantRec struct {
	Scope   capacity.Scope
	Call    string // workflow id / activity id, as send.Call
	Attempt int32
	At      time.Time // Lease.GrantedAt, on the store's clock
}

// cooldownRec is one cooldown Block: the scope holds no grant from Set
// (the store's clock, read after the block was applied) to Until (what
// the gate asked for, on the worker's clock, which is the store's here:
// both are capacity.SystemClock).
type cooldownRec struct {
	Scope      capacity.Scope
	Call       string // the call whose 429 set it
	Attempt    int32
	Set, Until time.Time
}

func newGrantLog() *grantLog {
	return &grantLog{MemoryStore: capacity.NewMemoryStore(capacity.MemoryOptions{})}
}

// attemptOf names the activity attempt of ctx as the send log does.
func attemptOf(ctx context.Context) (string, int32) {
	if !activity.IsActivity(ctx) {
		return "", 0
	}
	info := activity.GetInfo(ctx)
	return info.WorkflowExecution.ID + "/" + info.ActivityID, info.Attempt
}

// setOnGrant sets onGrant.
func (s *grantLog) setOnGrant(f func(attempt int32)) {
	s.mu.Lock()
	s.onGrant = f
	s.mu.Unlock()
}

// Reserve implements capacity.Store.
func (s *grantLog) Reserve(ctx context.Context, req capacity.Request) (capacity.Reservation, error) {
	res, err := s.MemoryStore.Reserve(ctx, req)
	if err == nil && res.Granted {
		call, attempt := attemptOf(ctx)
		s.mu.Lock()
		s.grants = append(s.grants, grantRec{Scope: req.Scope, Call: call, Attempt: attempt, At: res.Lease.GrantedAt})
		hook := s.onGrant
		s.mu.Unlock()
		if hook != nil {
			hook(attempt)
		}
	}
	return res, err
}

// Block implements capacity.Store.
func (s *grantLog) Block(ctx context.Context, sc capacity.Scope, b capacity.Block) error {
	err := s.MemoryStore.Block(ctx, sc, b)
	if err != nil || b.Reason != capacity.Cooldown {
		return err
	}
	snap, serr := s.MemoryStore.Snapshot(context.WithoutCancel(ctx), sc)
	if serr != nil {
		return fmt.Errorf("grantLog: snapshot after block: %w", serr)
	}
	call, attempt := attemptOf(ctx)
	s.mu.Lock()
	s.cooldowns = append(s.cooldowns, cooldownRec{Scope: sc, Call: call, Attempt: attempt, Set: snap.Now, Until: b.Until})
	s.mu.Unlock()
	return nil
}

// Observe implements capacity.Store.
func (s *grantLog) Observe(ctx context.Context, sc capacity.Scope, obs capacity.Observation) error {
	err := s.MemoryStore.Observe(ctx, sc, obs)
	d := obs.Dims[capacity.Tokens]
	if err != nil || !d.HasLimit {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.limits) - 1; i >= 0; i-- {
		if s.limits[i].Scope == sc {
			if s.limits[i].Limit == d.Limit {
				return nil
			}
			break
		}
	}
	snap, serr := s.MemoryStore.Snapshot(context.WithoutCancel(ctx), sc)
	if serr != nil {
		return fmt.Errorf("grantLog: snapshot after observe: %w", serr)
	}
	s.limits = append(s.limits, limitRec{Scope: sc, Limit: d.Limit, At: snap.Now})
	return nil
}

// learned returns when the store first applied a report of a token limit
// of at most limit on limit group group (zero if never).
func (s *grantLog) learned(group string, limit int64) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.limits {
		if l.Scope.LimitGroup == group && l.Limit <= limit {
			return l.At
		}
	}
	return time.Time{}
}

// grantedAt returns when each activity attempt on limit group group was
// granted, by "call#attempt" (sendLog's X-Client-Request-Id).
func (s *grantLog) grantedAt(group string) map[string]time.Time {
	gs, _ := s.record(group)
	out := make(map[string]time.Time, len(gs))
	for _, g := range gs {
		out[attemptID(g.Call, g.Attempt)] = g.At
	}
	return out
}

// attemptID names an activity attempt in a request's X-Client-Request-Id.
func attemptID(call string, attempt int32) string { return fmt.Sprintf("%s#%d", call, attempt) }

// record returns the grants and cooldowns on scopes of limit group group.
func (s *grantLog) record(group string) ([]grantRec, []cooldownRec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gs []grantRec
	for _, g := range s.grants {
		if g.Scope.LimitGroup == group {
			gs = append(gs, g)
		}
	}
	var cs []cooldownRec
	for _, c := range s.cooldowns {
		if c.Scope.LimitGroup == group {
			cs = append(cs, c)
		}
	}
	return gs, cs
}

// checkCooldownsHeld asserts, on the store's record of limit group group,
// that the gate set a cooldown for each of the n429 429s it read, and that
// no lease was granted on the scope while one held: from when the store
// had applied it to its end. It returns the cooldowns and the grants.
func (s *grantLog) checkCooldownsHeld(t *testing.T, group string, n429 int) (cooldowns, grants int) {
	t.Helper()
	gs, cs := s.record(group)
	assert.Lenf(t, cs, n429, "the gate set a cooldown for each of the %d 429s it read", n429)
	for _, c := range cs {
		for _, g := range gs {
			if g.Scope == c.Scope && !g.At.Before(c.Set) && g.At.Before(c.Until) {
				assert.Failf(t, "a lease granted during a cooldown",
					"call %s attempt %d was granted %v into the cooldown the 429 of call %s attempt %d set (it held %v)",
					g.Call, g.Attempt, g.At.Sub(c.Set), c.Call, c.Attempt, c.Until.Sub(c.Set))
			}
		}
	}
	return len(cs), len(gs)
}

// rateLimitEventsByGrant counts the 429s among sends as events, on the
// store's record: a 429 is a new event unless its call was granted before
// the store applied the cooldown of the current event's first 429 (it was
// on its way when the gate learned of the refusal, and met the same one).
// It returns the events and the 429s; a 429 whose grant the store has no
// record of fails the test.
func (s *grantLog) rateLimitEventsByGrant(t *testing.T, group string, sends []send) (events, n int) {
	t.Helper()
	gs, cs := s.record(group)
	type key struct {
		call    string
		attempt int32
	}
	granted := map[key]time.Time{}
	for _, g := range gs {
		granted[key{g.Call, g.Attempt}] = g.At
	}
	set := map[key]time.Time{}
	for _, c := range cs {
		set[key{c.Call, c.Attempt}] = c.Set
	}
	type refusal struct{ granted, set time.Time }
	var refused []refusal
	for _, sd := range sends {
		if sd.Status != http.StatusTooManyRequests {
			continue
		}
		k := key{sd.Call, sd.Attempt}
		at, ok := granted[k]
		if !assert.Truef(t, ok, "call %s attempt %d was refused without a grant on record", sd.Call, sd.Attempt) {
			continue
		}
		st, ok := set[k]
		if !assert.Truef(t, ok, "call %s attempt %d: its 429 set no cooldown", sd.Call, sd.Attempt) {
			continue
		}
		refused = append(refused, refusal{at, st})
	}
	slices.SortFunc(refused, func(a, b refusal) int { return a.granted.Compare(b.granted) })
	var known time.Time // when the store first applied a cooldown of the current event
	for _, r := range refused {
		switch {
		case events == 0 || !r.granted.Before(known):
			events, known = events+1, r.set
		case r.set.Before(known):
			known = r.set
		}
	}
	return events, len(refused)
}

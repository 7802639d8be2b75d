package interceptor

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/accounting"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/internal/secrets"
)

// A key pool (Options.Pools) is several credentials that calls share, each
// its own quota scope. A call names the pool as its credential; at each
// attempt the gate picks a member (poolpick.go), gates the call on the
// member's scope and tells the activity which member through the context
// (Credential). A failure that is the member's own (a 429, a refused or
// unpaid key, no access to the model) blocks the member and sends the call
// to another at once.

// poolChoiceKey is the context key of the member chosen for a gated call
// that named a pool.
type poolChoiceKey struct{}

type poolChoice struct{ pool, member string }

// Credential returns the credential a model-call activity running under ctx
// uses for the credential name its input gives: when name is the key pool
// (Options.Pools) the gated call named, the member the gate chose for this
// attempt; otherwise name itself (outside a gated call too). An activity
// resolves what it returns to an API key on the worker; the activities
// package does so for its own.
func Credential(ctx context.Context, name string) string {
	if c, ok := ctx.Value(poolChoiceKey{}).(poolChoice); ok && c.pool == name {
		return c.member
	}
	return name
}

// checkPools validates Options.Pools and returns a copy the caller cannot
// change afterwards.
func checkPools(pools map[string][]string) (map[string][]string, error) {
	if pools == nil {
		return nil, nil
	}
	out := make(map[string][]string, len(pools))
	for name, members := range pools {
		if err := checkPoolName("pool", name); err != nil {
			return nil, err
		}
		if len(members) == 0 {
			return nil, fmt.Errorf("%w: Pools[%q] has no members", ErrInvalidOptions, name)
		}
		seen := make(map[string]bool, len(members))
		for _, m := range members {
			if err := checkPoolName(fmt.Sprintf("a member of pool %q", name), m); err != nil {
				return nil, err
			}
			if seen[m] {
				return nil, fmt.Errorf("%w: Pools[%q] lists %q twice", ErrInvalidOptions, name, m)
			}
			if _, ok := pools[m]; ok {
				return nil, fmt.Errorf("%w: %q is both a pool and a member of pool %q", ErrInvalidOptions, m, name)
			}
			seen[m] = true
		}
		out[name] = slices.Clone(members)
	}
	return out, nil
}

// checkPoolName refuses an empty or key-shaped name (names land in scopes,
// metrics and errors); the error never repeats a key-shaped name.
func checkPoolName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: Pools: %s has an empty name", ErrInvalidOptions, what)
	case secrets.LooksLikeKey(name):
		return fmt.Errorf("%w: Pools: %s has the shape of an API key; name credentials (or use capacity.Fingerprint)", ErrInvalidOptions, what)
	}
	return nil
}

// poolCall is the pool a gated call named, as one attempt sees it.
type poolCall struct {
	name string
	// scope is the pool's own scope (the pool's name as the credential):
	// what the call learns on, and what names the pool in errors. No
	// budget is kept on it.
	scope   capacity.Scope
	members []*member
	chosen  *member // set by choose
}

// member is one credential of a pool, with what this attempt read of it.
type member struct {
	name   string
	scope  capacity.Scope
	limits capacity.Limits

	out    *memberOut    // why the member cannot take the call; nil: it can
	wait   time.Duration // how long until it may have room; 0: now
	paused bool          // wait is a block's (a cooldown, a breaker, a probe)
	used   float64       // capacity.Snapshot.Used
	ticket bool          // the call holds a ticket on it
	tie    float64       // random, orders members alike in all else
}

// newPoolCall resolves every member of pool name to its scope and limits:
// a member without limits is a misconfiguration, as a scope without them.
func newPoolCall(o *Options, call Call, name string, scope capacity.Scope, profile accounting.Profile) (*poolCall, error) {
	p := &poolCall{name: name, scope: scope}
	for _, m := range o.Pools[name] {
		sc := o.LimitGroups.ScopeFor(call.Provider, call.Model, m, call.Region)
		if err := sc.Validate(); err != nil {
			return nil, misconfigured(err.Error())
		}
		limits, _, err := o.scopeLimits(sc, profile, o.Clock.Now())
		if err != nil {
			return nil, misconfigured(err.Error() + " (a member of pool " + name + ")")
		}
		p.members = append(p.members, &member{name: m, scope: sc, limits: limits})
	}
	return p, nil
}

// memberBlock is the block a failure that is the chosen member's own puts
// on it, so the pool moves on: a 429 cools its scope; a refused key is out
// on every scope of its credential, and so is an unpaid account (billing,
// usage limit); a spent quota of the model or no access to it takes it out
// of this model only. False for failures the member does not cause.
func (g *gatedCall) memberBlock(v tgerrors.Verdict, now time.Time) (capacity.Block, bool) {
	switch v.Class {
	case tgerrors.RateLimited:
		return cooldownBlock(v, now), true
	case tgerrors.QuotaExhausted:
		b := g.quotaBlock(v, now)
		b.Credential = v.Reason == tgerrors.ReasonBilling || v.Reason == tgerrors.ReasonUsageLimit
		return b, true
	case tgerrors.BadCredential, tgerrors.NoAccess:
		return g.credentialBlock(v, now, v.Class == tgerrors.BadCredential), true
	}
	return capacity.Block{}, false
}

// reroute is the retry of a pool call whose member cannot take it (why
// says which and why): soon, on another member, costing no failure.
func (g *gatedCall) reroute(why string) error {
	return g.delayedRetry(0, false, "pool "+g.pool.name+": "+why+"; another key next", "")
}

// leaves reports whether the denial res on the chosen member sends the call
// to another member (why says which and why): the member is out (its
// block, or a spent daily quota), or a block it was not known to have when
// it was chosen (a cooldown since) holds it.
func (p *poolCall) leaves(res capacity.Reservation) (string, bool) {
	m := p.chosen
	switch res.Reason {
	case capacity.DenyBlocked:
		if b := res.Block; b.Reason == capacity.QuotaExhausted || b.Reason == capacity.CredentialDisabled && !b.Probing || !m.paused {
			return m.name + " " + b.Reason.String(), true
		}
	case capacity.DenyDailyQuota, capacity.DenyKeyQuota:
		return m.name + " " + res.Reason.String(), true
	}
	return "", false
}

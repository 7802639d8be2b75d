package interceptor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
)

// outKind is why a member cannot take a call, in the order in which the
// pool's error reports it when every member is out: a quota comes back at
// its reset (the workflow may sleep until then), a deadline or a limit is
// the call's, a refused key needs a person.
type outKind int

const (
	outQuota    outKind = iota // an exhausted quota: the provider's, a daily budget, the fairness key's
	outDeadline                // no room before the call's deadline
	outTooLarge                // the call exceeds what the member's limits admit
	outRefused                 // the credential was refused
	outNoAccess                // the credential may not use the model
)

// memberOut says why a member cannot take the call: secret-free names and
// codes only.
type memberOut struct {
	kind   outKind
	why    string        // "credential_disabled", "daily_quota", ...
	detail string        // a provider code, a dimension
	left   time.Duration // until the block or the quota ends; 0: unknown
	reason tgerrors.Reason
	large  *capacity.DemandTooLargeError
}

func (o *memberOut) String() string {
	s := o.why
	if o.detail != "" {
		s += " (" + o.detail + ")"
	}
	if o.left > 0 {
		s += " for " + o.left.Round(time.Second).String()
	}
	return s
}

// blockOut is the memberOut of a block that takes a member out, left
// before it ends; nil for a block that only delays it.
func blockOut(b capacity.Block, left time.Duration) *memberOut {
	b.Detail = cleanCode(b.Detail)
	switch {
	case b.Reason == capacity.QuotaExhausted:
		return &memberOut{kind: outQuota, why: b.Reason.String(), detail: b.Detail, left: left}
	case b.Reason == capacity.CredentialDisabled && !b.Probing && b.Credential:
		return &memberOut{kind: outRefused, why: b.Reason.String(), detail: b.Detail, left: left}
	case b.Reason == capacity.CredentialDisabled && !b.Probing:
		return &memberOut{kind: outNoAccess, why: "no_access", detail: b.Detail, left: left}
	}
	return nil
}

// choose picks the member of g's pool this attempt goes on and makes its
// scope and limits g's. From every member's summary (readSummary:
// read-only, in parallel) it skips the members out of the pool and those
// paused; a call that holds a ticket on a member that can serve it keeps
// its place there.
// Else it asks the others for the call without booking, the least used
// first (random among equals), and keeps the first grant: granted is true
// and res is the reservation. With no grant it picks the member with the
// shortest wait, the least used among equals, for the caller to reserve on
// as on any scope. Tickets the call holds on the members it leaves are
// released. With every member out it returns the pool's error
// (poolExhausted); a store error is returned as it is.
func (g *gatedCall) choose(ctx context.Context) (res capacity.Reservation, granted bool, err error) {
	p := g.pool
	sums := make([]capacity.Summary, len(p.members))
	errs := make([]error, len(p.members))
	var wg sync.WaitGroup
	for i, m := range p.members {
		wg.Go(func() { sums[i], errs[i] = readSummary(ctx, g.opts.Store, m.scope, g.id) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, false, err
	}
	for i, m := range p.members {
		m.read(sums[i])
		m.tie = g.opts.Rand()
	}
	for _, m := range p.members {
		if m.ticket && m.out == nil && m.wait == 0 {
			g.pick(ctx, m)
			return res, false, nil
		}
	}

	var free []*member
	for _, m := range p.members {
		if m.out == nil && m.wait == 0 {
			free = append(free, m)
		}
	}
	slices.SortFunc(free, func(a, b *member) int { return cmp.Or(cmp.Compare(a.used, b.used), cmp.Compare(a.tie, b.tie)) })
	for _, m := range free {
		req := g.requestFor(m.scope, m.limits)
		req.Book = false
		r, err := g.opts.Store.Reserve(ctx, req)
		var large *capacity.DemandTooLargeError
		switch {
		case errors.As(err, &large):
			m.out = &memberOut{kind: outTooLarge, why: "exceeds_limit", detail: large.Dimension.String(), large: large}
			continue
		case err != nil:
			return res, false, err
		case r.Granted:
			g.pick(ctx, m)
			return r, true, nil
		}
		m.denied(r)
	}

	var best *member
	for _, m := range p.members {
		if m.out == nil && (best == nil || cmp.Or(cmp.Compare(m.wait, best.wait), cmp.Compare(m.used, best.used), cmp.Compare(m.tie, best.tie)) < 0) {
			best = m
		}
	}
	if best == nil {
		return res, false, g.poolExhausted()
	}
	g.pick(ctx, best)
	return res, false, nil
}

// read takes what the member's snapshot says for call: out, paused, how
// used, and whether call holds a ticket on it.
func (m *member) read(s capacity.Summary) {
	m.out, m.wait, m.ticket = nil, s.Paused(), s.HoldsTicket
	m.paused = m.wait > 0
	m.used = s.Used()
	if b, ok := s.OutBlock(); ok {
		m.out = blockOut(b, b.Until.Sub(s.Now))
	}
}

// readSummary reads sc's summary for call from store: its own where it is
// a capacity.Summarizer (in Redis a read that does not grow with the calls
// waiting), else from its snapshot.
func readSummary(ctx context.Context, store capacity.Store, sc capacity.Scope, call string) (capacity.Summary, error) {
	if s, ok := store.(capacity.Summarizer); ok {
		return s.Summary(ctx, sc, call)
	}
	snap, err := store.Snapshot(ctx, sc)
	if err != nil {
		return capacity.Summary{}, err
	}
	return snap.Summary(call), nil
}

// denied takes what a denial without booking says of the member.
func (m *member) denied(r capacity.Reservation) {
	left := max(r.RetryAt.Sub(r.Now), 0)
	switch r.Reason {
	case capacity.DenyBlocked:
		if m.out = blockOut(r.Block, left); m.out == nil {
			m.wait, m.paused = left, true
		}
	case capacity.DenyDailyQuota:
		m.out = &memberOut{kind: outQuota, why: r.Reason.String(), detail: r.Binding.String(), left: left, reason: tgerrors.ReasonDailyQuota}
	case capacity.DenyKeyQuota:
		m.out = &memberOut{kind: outQuota, why: r.Reason.String(), detail: r.Binding.String(), left: left, reason: tgerrors.ReasonKeyQuota}
	case capacity.DenyDeadline:
		m.out = &memberOut{kind: outDeadline, why: r.Reason.String(), detail: r.Binding.String()}
	case capacity.DenyTicket:
		m.ticket, m.wait = true, left
	default:
		if r.Reason == capacity.DenyCapacity && r.Binding == capacity.InFlight {
			// A slot frees at the next settle, usually long before the
			// lease expiry the store reports.
			left = min(left, inFlightRetry)
		}
		m.wait = left
	}
}

// pick makes m the member this attempt goes on and releases the tickets
// the call holds on the others (each lapses by itself if that fails).
func (g *gatedCall) pick(ctx context.Context, m *member) {
	p := g.pool
	p.chosen = m
	g.scope, g.limits = m.scope, m.limits
	for _, o := range p.members {
		if o != m && o.ticket {
			if err := g.opts.Store.Release(context.WithoutCancel(ctx), capacity.Lease{Scope: o.scope, Call: g.id}); err != nil {
				g.logger(ctx).Warn("tollgate: releasing a ticket on another key of the pool failed", "scope", o.scope.Key(), "error", err)
			}
		}
	}
	g.logger(ctx).Debug("tollgate: pool key chosen", "pool", p.name, "scope", m.scope.Key(), "used", m.used, "wait", m.wait)
}

// poolExhausted is the non-retryable error of a call no member of its pool
// can take: of the members' reasons, the first of quota (with the earliest
// reset), deadline, limit, refused credential, no access sets its type; the
// message names every member and why.
func (g *gatedCall) poolExhausted() error {
	p := g.pool
	var first *memberOut
	var parts []string
	for _, m := range p.members {
		o := m.out
		parts = append(parts, m.name+" "+o.String())
		if first == nil || o.kind < first.kind || o.kind == first.kind && o.kind == outQuota && o.left > 0 && (first.left <= 0 || o.left < first.left) {
			first = o
		}
	}
	scope := p.scope.Key()
	msg := fmt.Sprintf("tollgate: no key of pool %s can take the call on %s/%s: %s",
		p.name, p.scope.Provider, p.scope.LimitGroup, strings.Join(parts, "; "))
	d := tgerrors.Details{Reason: tgerrors.ReasonPoolExhausted, Provider: g.call.Provider, Scope: scope, Code: first.detail}
	var typ string
	switch first.kind {
	case outDeadline:
		return tgerrors.DeadlineUnmeetableError(strings.TrimPrefix(msg, "tollgate: "), scope)
	case outTooLarge:
		l := first.large
		d = tgerrors.Details{Reason: tgerrors.ReasonPoolExhausted, Scope: scope, Dimension: l.Dimension.String(), Limit: int64(l.Capacity), Requested: l.Charge}
		typ = tgerrors.TypeExceedsLimit
	case outQuota:
		d.Class, typ = tgerrors.QuotaExhausted, tgerrors.TypeQuotaExhausted
		if first.left > 0 {
			d.ResetAt = g.opts.Clock.Now().Add(first.left)
		}
	case outRefused:
		d.Class, typ = tgerrors.BadCredential, tgerrors.TypeBadCredential
	default:
		d.Class, typ = tgerrors.NoAccess, tgerrors.TypeNoAccess
	}
	return temporal.NewApplicationErrorWithOptions(msg, typ, temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{d}})
}

// cleanCode is a provider code as the errors package puts it in Details:
// only characters of a token, bounded.
func cleanCode(code string) string {
	return tgerrors.DetailsFor(tgerrors.Verdict{Code: code}, "").Code
}

package interceptor

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/ledger"
	"github.com/tollgate-dev/tollgate/capacity/spend"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
)

// Metrics of the cost ledger. Their tags are scope keys and fixed words,
// never tenants' names, prompts or keys.
const (
	metricLedgerFailures = "tollgate.ledger.failures" // counter: scope, op (record, read)
	metricSpendRefused   = "tollgate.spend.refused"   // counter: scope, cap (tenant, connection)
)

// spendReadTimeout bounds the read of the day's spend before admission;
// past it the call goes on, not held to its caps.
const spendReadTimeout = 500 * time.Millisecond

// capEpsilon absorbs floating-point error when spend is compared with a
// cap, so a call that brings spend exactly to its cap is admitted.
const capEpsilon = 1e-9

// ledgerGate is a worker's side of the cost ledger (Options.Ledger): it
// records each settled call and holds calls to their spend caps.
//
// A cap is checked against the day's settled spend in the ledger plus the
// worst case (spend.Price.WorstCase) of this worker's calls that were
// admitted against it and are not recorded yet, plus the call's own worst
// case. Calls in flight on other workers are not seen, so together they
// may pass a cap by at most what they cost.
type ledgerGate struct {
	ledger ledger.Ledger // nil: no ledger
	prices spend.Prices
	caps   spend.Caps

	mu      sync.Mutex
	pending map[pendingSpend]float64 // this worker's worst cases not yet recorded
}

// pendingSpend names a cap on a day: its kind (tgerrors.SpendCapTenant or
// SpendCapConnection) and the tenant or connection.
type pendingSpend struct {
	day, kind, name string
}

func newLedgerGate(o Options) *ledgerGate {
	return &ledgerGate{ledger: o.Ledger, prices: o.Prices, caps: o.SpendCaps, pending: map[pendingSpend]float64{}}
}

// validateLedger checks Ledger, Prices and SpendCaps.
func (o Options) validateLedger() error {
	if err := o.Prices.Validate(); err != nil {
		return fmt.Errorf("%w: Prices: %w", ErrInvalidOptions, err)
	}
	if err := o.SpendCaps.Validate(); err != nil {
		return fmt.Errorf("%w: SpendCaps: %w", ErrInvalidOptions, err)
	}
	if o.SpendCaps.Empty() {
		return nil
	}
	if o.Ledger == nil {
		return fmt.Errorf("%w: SpendCaps need a Ledger to read the day's spend from (the Redis store is one; in one process, ledger.NewMemory)", ErrInvalidOptions)
	}
	if len(o.Prices) == 0 {
		return fmt.Errorf("%w: SpendCaps need Prices: without them no call costs anything", ErrInvalidOptions)
	}
	return nil
}

// admitSpend refuses g if its worst case would take its tenant or its
// connection past a spend cap for the day, with a non-retryable
// tollgate.QuotaExhausted (reason spend_cap) that resets when the scope's
// day window ends. Otherwise it holds g's worst case against the caps until
// release is called. A ledger that cannot be read holds nothing back.
func (l *ledgerGate) admitSpend(ctx context.Context, g *gatedCall) (release func(), err error) {
	noop := func() {}
	if l.ledger == nil || l.caps.Empty() {
		return noop, nil
	}
	tenant, conn := g.call.FairnessKey, g.scope.CredentialKey()
	tenantCap, tenantCapped := l.caps.TenantCap(tenant)
	connCap, connCapped := l.caps.ConnectionCap(conn)
	if !tenantCapped && !connCapped {
		return noop, nil
	}
	worst := 0.0
	if p, ok := l.prices.Lookup(g.call.Provider, g.call.Model, g.scope.LimitGroup); ok {
		worst = p.WorstCase(g.demand)
	}
	day, end := ledger.Day(g.opts.Clock.Now(), g.limits.DayReset)
	rctx, cancel := context.WithTimeout(ctx, spendReadTimeout)
	spent, err := l.ledger.Spent(rctx, day, tenant, conn)
	cancel()
	if err != nil {
		logFailure(g.logger(ctx), "tollgate: reading the day's spend failed; the call is not held to its spend caps", err, "scope", g.scope.Key())
		g.a.root.tel.metrics(ctx).WithTags(map[string]string{"scope": g.scope.Key(), "op": "read"}).Counter(metricLedgerFailures).Inc(1)
		return noop, nil
	}

	tk := pendingSpend{day, tgerrors.SpendCapTenant, tenant}
	ck := pendingSpend{day, tgerrors.SpendCapConnection, conn}
	l.mu.Lock()
	defer l.mu.Unlock()
	if tenantCapped && spent.Tenant+l.pending[tk]+worst > tenantCap+capEpsilon {
		return nil, l.refuse(ctx, g, tk, spent.Tenant+l.pending[tk], tenantCap, worst, end)
	}
	if connCapped && spent.Connection+l.pending[ck]+worst > connCap+capEpsilon {
		return nil, l.refuse(ctx, g, ck, spent.Connection+l.pending[ck], connCap, worst, end)
	}
	if worst <= 0 {
		return noop, nil
	}
	l.pending[tk] += worst
	l.pending[ck] += worst
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			for _, k := range []pendingSpend{tk, ck} {
				if l.pending[k] -= worst; l.pending[k] <= capEpsilon {
					delete(l.pending, k)
				}
			}
		})
	}, nil
}

// refuse returns the error of a call that cap k would refuse.
func (l *ledgerGate) refuse(ctx context.Context, g *gatedCall, k pendingSpend, spent, limit, worst float64, end time.Time) error {
	g.a.root.tel.metrics(ctx).WithTags(map[string]string{"scope": g.scope.Key(), "cap": k.kind}).Counter(metricSpendRefused).Inc(1)
	name := strconv.Quote(k.name)
	if k.kind == tgerrors.SpendCapTenant && k.name == "" {
		name = "(no fairness key)"
	}
	v := tgerrors.Verdict{Class: tgerrors.QuotaExhausted, Reason: tgerrors.ReasonSpendCap, Provider: g.call.Provider,
		Code: k.kind, ResetAt: end,
		Message: fmt.Sprintf("%s %s spent %s of its %s cap for %s; this call may cost up to %s",
			k.kind, name, money(spent), money(limit), k.day, money(worst))}
	g.logger(ctx).Info("tollgate: refused by a spend cap", "scope", g.scope.Key(), "cap", k.kind, "day", k.day, "reset", end)
	return tgerrors.Converter{Jitter: g.jitterFunc()}.ActivityError(v, g.scope.Key())
}

// money formats an amount of the Prices' unit.
func money(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }

// record adds g's call, settled with usage u on lease, to the ledger; a
// failure is logged and counted, never returned.
func (l *ledgerGate) record(ctx context.Context, g *gatedCall, lease capacity.Lease, u capacity.Usage) {
	if l.ledger == nil {
		return
	}
	at := lease.GrantedAt
	if at.IsZero() {
		at = g.opts.Clock.Now()
	}
	day, _ := ledger.Day(at, g.limits.DayReset)
	e := ledger.Entry{Lease: lease.ID, Day: day, Scope: g.scope, Tenant: g.call.FairnessKey,
		WorkflowType: g.workflowType(), Tokens: ledger.TokensOf(u)}
	if e.Lease == "" {
		e.Lease = capacity.LeaseID(g.id, max(int(g.info.Attempt), 1))
	}
	if p, ok := l.prices.Lookup(g.call.Provider, g.call.Model, g.scope.LimitGroup); ok {
		e.Cost = p.Cost(u)
	} else {
		e.Unpriced = true
	}
	ctx, cancel := context.WithTimeout(ctx, g.opts.SettleTimeout)
	defer cancel()
	if _, err := l.ledger.Record(ctx, e); err != nil {
		logFailure(g.logger(ctx), "tollgate: recording a settled call in the ledger failed", err, "scope", g.scope.Key())
		g.a.root.tel.metrics(ctx).WithTags(map[string]string{"scope": g.scope.Key(), "op": "record"}).Counter(metricLedgerFailures).Inc(1)
	}
}

// workflowType is the type of the workflow that made g's call, as the
// ledger names it: "" if unknown or not a name capacity.ValidateKind
// accepts.
func (g *gatedCall) workflowType() string {
	if g.info.WorkflowType == nil || capacity.ValidateKind(g.info.WorkflowType.Name) != nil {
		return ""
	}
	return g.info.WorkflowType.Name
}

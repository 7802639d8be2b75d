package ledger

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

var _ Ledger = (*Memory)(nil)

// Memory is a Ledger held in one process's memory, by day, under one lock:
// it is written once per settled call, off the admission path. It keeps
// days and leases as long as the Redis store's ledger does (Retention,
// LeaseRetention), in its clock's time, and passes the same contract suite
// (storetest.RunLedger). Use NewMemory; a Memory is safe for concurrent
// use.
type Memory struct {
	clock  capacity.Clock
	mu     sync.Mutex
	days   map[string]*memLedgerDay
	leases map[ledgerLease]time.Time // when each lease was recorded
	pruned time.Time                 // when leases were last pruned
}

// memLedgerDay is one day of the ledger, as the Redis store keeps it: rows
// and tenants' and connections' spend.
type memLedgerDay struct {
	rows    map[ledgerRowKey]*Row
	tenants map[string]float64
	conns   map[string]float64
	last    time.Time // the day's last record, in the store's clock
}

type ledgerRowKey struct {
	scope      capacity.Scope
	tenant, wf string
}

// ledgerLease is a lease recorded on a day.
type ledgerLease struct{ day, lease string }

// NewMemory returns an empty ledger that reads the time from clock (nil:
// the system clock).
func NewMemory(clock capacity.Clock) *Memory {
	if clock == nil {
		clock = capacity.SystemClock{}
	}
	return &Memory{clock: clock, days: make(map[string]*memLedgerDay), leases: make(map[ledgerLease]time.Time)}
}

// Record implements Ledger.
func (l *Memory) Record(ctx context.Context, e Entry) (bool, error) {
	if err := checkEntry(ctx, e); err != nil {
		return false, err
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forget(now)
	lk := ledgerLease{e.Day, e.Lease}
	if at, ok := l.leases[lk]; ok && now.Sub(at) <= LeaseRetention {
		return false, nil
	}
	l.leases[lk] = now
	d := l.days[e.Day]
	if d == nil {
		d = &memLedgerDay{rows: map[ledgerRowKey]*Row{}, tenants: map[string]float64{}, conns: map[string]float64{}}
		l.days[e.Day] = d
	}
	d.last = now
	k := ledgerRowKey{e.Scope, e.Tenant, e.WorkflowType}
	r := d.rows[k]
	if r == nil {
		r = &Row{Day: e.Day, Scope: e.Scope, Tenant: e.Tenant, WorkflowType: e.WorkflowType}
		d.rows[k] = r
	}
	r.Calls++
	if e.Unpriced {
		r.Unpriced++
	}
	r.Tokens = r.Tokens.Add(e.Tokens)
	r.Cost += e.Cost
	d.tenants[e.Tenant] += e.Cost
	d.conns[e.Scope.CredentialKey()] += e.Cost
	return true, nil
}

// forget drops the days last recorded in more than Retention before now
// and, every tenth of LeaseRetention, the leases recorded more than
// LeaseRetention before, as the Redis store's keys expire. The caller
// holds l.mu.
func (l *Memory) forget(now time.Time) {
	for day, d := range l.days {
		if now.Sub(d.last) > Retention {
			delete(l.days, day)
		}
	}
	if now.Sub(l.pruned) < LeaseRetention/10 {
		return
	}
	l.pruned = now
	for k, at := range l.leases {
		if now.Sub(at) > LeaseRetention {
			delete(l.leases, k)
		}
	}
}

// Spent implements Ledger.
func (l *Memory) Spent(ctx context.Context, day, tenant, connection string) (Spend, error) {
	if err := ctx.Err(); err != nil {
		return Spend{}, err
	}
	if err := ValidateDay(day); err != nil {
		return Spend{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forget(l.clock.Now())
	d := l.days[day]
	if d == nil {
		return Spend{}, nil
	}
	return Spend{Tenant: d.tenants[tenant], Connection: d.conns[connection]}, nil
}

// LedgerRows implements Ledger.
func (l *Memory) LedgerRows(ctx context.Context, day string) ([]Row, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if day != "" {
		if err := ValidateDay(day); err != nil {
			return nil, err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forget(l.clock.Now())
	rows := []Row{}
	for dk, d := range l.days {
		if day != "" && dk != day {
			continue
		}
		for _, r := range d.rows {
			rows = append(rows, *r)
		}
	}
	SortRows(rows)
	return rows, nil
}

// SortRows sorts rows by day, scope key, tenant and workflow type.
func SortRows(rows []Row) {
	slices.SortFunc(rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.Scope.Key(), b.Scope.Key()),
			cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.WorkflowType, b.WorkflowType))
	})
}

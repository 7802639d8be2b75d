package capacity

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

var _ Ledger = (*MemoryStore)(nil)

// memLedger is one MemoryStore's ledger, by day, under one lock: it is
// written once per settled call, off the admission path.
type memLedger struct {
	mu     sync.Mutex
	days   map[string]*memLedgerDay
	leases map[ledgerLease]time.Time // when each lease was recorded
	pruned time.Time                 // when leases were last pruned
}

// memLedgerDay is one day of the ledger, as the Redis store keeps it: rows
// and tenants' and connections' spend.
type memLedgerDay struct {
	rows    map[ledgerRowKey]*LedgerRow
	tenants map[string]float64
	conns   map[string]float64
	last    time.Time // the day's last record, in the store's clock
}

type ledgerRowKey struct {
	scope      Scope
	tenant, wf string
}

// ledgerLease is a lease recorded on a day.
type ledgerLease struct{ day, lease string }

// Record implements Ledger.
func (s *MemoryStore) Record(ctx context.Context, e LedgerEntry) (bool, error) {
	if err := checkLedgerEntry(ctx, e); err != nil {
		return false, err
	}
	now := s.clock.Now()
	l := &s.ledger
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forget(now)
	lk := ledgerLease{e.Day, e.Lease}
	if at, ok := l.leases[lk]; ok && now.Sub(at) <= LedgerLeaseMemory {
		return false, nil
	}
	l.leases[lk] = now
	d := l.days[e.Day]
	if d == nil {
		d = &memLedgerDay{rows: map[ledgerRowKey]*LedgerRow{}, tenants: map[string]float64{}, conns: map[string]float64{}}
		l.days[e.Day] = d
	}
	d.last = now
	k := ledgerRowKey{e.Scope, e.Tenant, e.WorkflowType}
	r := d.rows[k]
	if r == nil {
		r = &LedgerRow{Day: e.Day, Scope: e.Scope, Tenant: e.Tenant, WorkflowType: e.WorkflowType}
		d.rows[k] = r
	}
	r.Calls++
	if e.Unpriced {
		r.Unpriced++
	}
	r.LedgerTokens = r.LedgerTokens.Add(e.Tokens)
	r.Cost += e.Cost
	d.tenants[e.Tenant] += e.Cost
	d.conns[e.Scope.CredentialKey()] += e.Cost
	return true, nil
}

// forget drops the days last recorded in more than LedgerMemory before now
// and, every tenth of LedgerLeaseMemory, the leases recorded more than
// LedgerLeaseMemory before, as the Redis store's keys expire. The caller
// holds l.mu.
func (l *memLedger) forget(now time.Time) {
	for day, d := range l.days {
		if now.Sub(d.last) > LedgerMemory {
			delete(l.days, day)
		}
	}
	if now.Sub(l.pruned) < LedgerLeaseMemory/10 {
		return
	}
	l.pruned = now
	for k, at := range l.leases {
		if now.Sub(at) > LedgerLeaseMemory {
			delete(l.leases, k)
		}
	}
}

// Spent implements Ledger.
func (s *MemoryStore) Spent(ctx context.Context, day, tenant, connection string) (Spend, error) {
	if err := ctx.Err(); err != nil {
		return Spend{}, err
	}
	if err := ValidateLedgerDay(day); err != nil {
		return Spend{}, err
	}
	l := &s.ledger
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forget(s.clock.Now())
	d := l.days[day]
	if d == nil {
		return Spend{}, nil
	}
	return Spend{Tenant: d.tenants[tenant], Connection: d.conns[connection]}, nil
}

// LedgerRows implements Ledger.
func (s *MemoryStore) LedgerRows(ctx context.Context, day string) ([]LedgerRow, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if day != "" {
		if err := ValidateLedgerDay(day); err != nil {
			return nil, err
		}
	}
	l := &s.ledger
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forget(s.clock.Now())
	rows := []LedgerRow{}
	for dk, d := range l.days {
		if day != "" && dk != day {
			continue
		}
		for _, r := range d.rows {
			rows = append(rows, *r)
		}
	}
	SortLedgerRows(rows)
	return rows, nil
}

// SortLedgerRows sorts rows by day, scope key, tenant and workflow type.
func SortLedgerRows(rows []LedgerRow) {
	slices.SortFunc(rows, func(a, b LedgerRow) int {
		return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.Scope.Key(), b.Scope.Key()),
			cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.WorkflowType, b.WorkflowType))
	})
}

package capacity

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Ledger is implemented by stores that keep a cost ledger: the tokens and
// cost of every settled call, summed per day, scope, tenant (fairness key)
// and workflow type, shared by every worker on the store. The gate records
// each call that settles with usage (interceptor.Options.Ledger) and reads
// the day's spend to enforce spend caps (SpendCaps); `tollgate cost`
// lists it.
//
// A call is recorded once per lease: a second Record of a lease (and day)
// within LedgerLeaseMemory of the first adds nothing. A day's rows are kept
// LedgerMemory after its last record. Tenants and workflow types are names,
// never secrets or prompt text.
type Ledger interface {
	// Record adds e to its row (e.Day, e.Scope, e.Tenant, e.WorkflowType)
	// and to its tenant's and its connection's (e.Scope.CredentialKey())
	// spend of e.Day, all at once. It reports false, adding nothing, when
	// e.Lease was recorded on e.Day less than LedgerLeaseMemory before.
	Record(ctx context.Context, e LedgerEntry) (bool, error)
	// Spent returns what tenant and what connection (a
	// Scope.CredentialKey) spent on day, over every scope; zero for
	// nothing recorded.
	Spent(ctx context.Context, day, tenant, connection string) (Spend, error)
	// LedgerRows returns the rows of day, or of every day kept when day is
	// empty, sorted by day, scope key, tenant and workflow type.
	LedgerRows(ctx context.Context, day string) ([]LedgerRow, error)
}

// LedgerMemory is how long a store keeps a day of the ledger after the last
// call recorded in it: long enough to reconcile a monthly invoice.
const LedgerMemory = 35 * 24 * time.Hour

// LedgerLeaseMemory is how long a store remembers that a lease was
// recorded, so a repeated Record of it adds nothing: long past any retry
// of a record (a client resending a script whose reply was lost, a settle
// run again), short enough that the memory holds an hour of calls.
const LedgerLeaseMemory = time.Hour

// MaxLeaseIDLength is the longest lease id a ledger accepts, in bytes.
const MaxLeaseIDLength = 200

// LedgerDayLayout is the layout of a ledger day (time.Parse): the date on
// which the day window starts, in its boundary's location.
const LedgerDayLayout = "2006-01-02"

// ErrInvalidLedgerEntry is returned (wrapped) for an entry, day or name a
// ledger cannot record or read. The error never holds a tenant's or a
// lease's value.
var ErrInvalidLedgerEntry = errors.New("capacity: invalid ledger entry")

// LedgerTokens are the tokens of a call as its provider reported them.
type LedgerTokens struct {
	// Input is the prompt not read from the cache: uncached input plus
	// cache writes (Usage.InputTokens + Usage.CacheCreationInputTokens).
	Input int64 `json:"input_tokens"`
	// CachedInput is the prompt read from the cache
	// (Usage.CacheReadInputTokens).
	CachedInput int64 `json:"cached_input_tokens"`
	// Output is the completion, reasoning included (Usage.OutputTokens +
	// Usage.ExtraReasoningTokens).
	Output int64 `json:"output_tokens"`
}

// LedgerTokensOf returns the ledger's tokens of usage u.
func LedgerTokensOf(u Usage) LedgerTokens {
	return LedgerTokens{
		Input:       u.InputTokens + u.CacheCreationInputTokens,
		CachedInput: u.CacheReadInputTokens,
		Output:      u.OutputTokens + u.ExtraReasoningTokens,
	}
}

// Add returns t plus o.
func (t LedgerTokens) Add(o LedgerTokens) LedgerTokens {
	return LedgerTokens{Input: t.Input + o.Input, CachedInput: t.CachedInput + o.CachedInput, Output: t.Output + o.Output}
}

// LedgerEntry is one settled call, as the gate records it.
type LedgerEntry struct {
	// Lease is the call's lease id (Lease.ID): a lease is recorded once.
	Lease string
	// Day is the day window the call was admitted in (LedgerDay).
	Day string
	// Scope is the call's quota scope; its CredentialKey is the connection.
	Scope Scope
	// Tenant is the call's fairness key (ValidateFairnessKey); empty for a
	// call without one.
	Tenant string
	// WorkflowType is the type of the workflow that made the call
	// (ValidateKind); empty if unknown.
	WorkflowType string
	// Tokens are the call's tokens as the provider reported them.
	Tokens LedgerTokens
	// Cost is what the tokens cost (Price.Cost), in Prices' unit; zero when
	// Unpriced.
	Cost float64
	// Unpriced reports that Prices had no price for the call's model: its
	// tokens are recorded, its cost is zero, and its row counts it.
	Unpriced bool
}

// Validate reports whether e can be recorded.
func (e LedgerEntry) Validate() error {
	if e.Lease == "" || len(e.Lease) > MaxLeaseIDLength {
		return fmt.Errorf("%w: Lease is %d bytes; want 1 to %d", ErrInvalidLedgerEntry, len(e.Lease), MaxLeaseIDLength)
	}
	if err := ValidateLedgerDay(e.Day); err != nil {
		return err
	}
	if err := e.Scope.Validate(); err != nil {
		return err
	}
	if err := ValidateFairnessKey(e.Tenant); err != nil {
		return fmt.Errorf("%w: Tenant: %w", ErrInvalidLedgerEntry, err)
	}
	if e.WorkflowType != "" {
		if err := ValidateKind(e.WorkflowType); err != nil {
			return fmt.Errorf("%w: WorkflowType: %w", ErrInvalidLedgerEntry, err)
		}
	}
	if e.Tokens.Input < 0 || e.Tokens.CachedInput < 0 || e.Tokens.Output < 0 {
		return fmt.Errorf("%w: negative token count", ErrInvalidLedgerEntry)
	}
	if math.IsNaN(e.Cost) || math.IsInf(e.Cost, 0) || e.Cost < 0 || e.Unpriced && e.Cost != 0 {
		return fmt.Errorf("%w: Cost is %v; want a finite number >= 0, and 0 when Unpriced", ErrInvalidLedgerEntry, e.Cost)
	}
	return nil
}

// LedgerRow is what the calls of one day, scope, tenant and workflow type
// used and cost.
type LedgerRow struct {
	Day          string `json:"day"`
	Scope        Scope  `json:"-"`
	Tenant       string `json:"tenant"`
	WorkflowType string `json:"workflow_type"`
	// Calls counts the calls recorded; Unpriced those among them whose
	// model had no price (their cost is not in Cost).
	Calls    int64 `json:"calls"`
	Unpriced int64 `json:"unpriced_calls"`
	LedgerTokens
	Cost float64 `json:"cost"`
}

// Spend is what a tenant and a connection spent in one day.
type Spend struct {
	Tenant, Connection float64
}

// ValidateLedgerDay reports whether day is a ledger day: a date laid out as
// LedgerDayLayout.
func ValidateLedgerDay(day string) error {
	if _, err := time.Parse(LedgerDayLayout, day); err != nil || len(day) != len(LedgerDayLayout) {
		return fmt.Errorf("%w: day %q is not a date laid out as %s", ErrInvalidLedgerEntry, day, LedgerDayLayout)
	}
	return nil
}

// LedgerDay returns the ledger day of the day window of b that holds t (the
// date the window starts on, in b's location) and the window's end, when
// the day's spend caps reset.
func LedgerDay(t time.Time, b DayBoundary) (day string, end time.Time) {
	end = b.Next(t)
	loc := b.Location
	if loc == nil {
		loc = time.UTC
	}
	y, m, d := end.Add(-b.Offset).In(loc).Date()
	return time.Date(y, m, d-1, 0, 0, 0, 0, time.UTC).Format(LedgerDayLayout), end
}

// checkLedgerEntry validates the arguments of Ledger.Record.
func checkLedgerEntry(ctx context.Context, e LedgerEntry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return e.Validate()
}

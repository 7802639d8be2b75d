package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Ledger is implemented by stores that keep a cost ledger: the tokens and
// cost of every settled call, summed per day, scope, tenant (fairness key)
// and workflow type, shared by every worker on the store. The gate records
// each call that settles with usage (interceptor.Options.Ledger) and reads
// the day's spend to enforce spend caps (spend.Caps); `tollgate cost`
// lists it.
//
// A call is recorded once per lease: a second Record of a lease (and day)
// within LeaseRetention of the first adds nothing. A day's rows are kept
// Retention after its last record. Tenants and workflow types are names,
// never secrets or prompt text.
type Ledger interface {
	// Record adds e to its row (e.Day, e.Scope, e.Tenant, e.WorkflowType)
	// and to its tenant's and its connection's (e.Scope.CredentialKey())
	// spend of e.Day, all at once. It reports false, adding nothing, when
	// e.Lease was recorded on e.Day less than LeaseRetention before.
	Record(ctx context.Context, e Entry) (bool, error)
	// Spent returns what tenant and what connection (a
	// Scope.CredentialKey) spent on day, over every scope; zero for
	// nothing recorded.
	Spent(ctx context.Context, day, tenant, connection string) (Spend, error)
	// LedgerRows returns the rows of day, or of every day kept when day is
	// empty, sorted by day, scope key, tenant and workflow type.
	LedgerRows(ctx context.Context, day string) ([]Row, error)
}

// Retention is how long a store keeps a day of the ledger after the last
// call recorded in it: long enough to reconcile a monthly invoice.
const Retention = 35 * 24 * time.Hour

// LeaseRetention is how long a store remembers that a lease was
// recorded, so a repeated Record of it adds nothing: long past any retry
// of a record (a client resending a script whose reply was lost, a settle
// run again), short enough that the memory holds an hour of calls.
const LeaseRetention = time.Hour

// MaxLeaseIDLength is the longest lease id a ledger accepts, in bytes.
const MaxLeaseIDLength = 200

// DayLayout is the layout of a ledger day (time.Parse): the date on
// which the day window starts, in its boundary's location.
const DayLayout = "2006-01-02"

// ErrInvalidEntry is returned (wrapped) for an entry, day or name a
// ledger cannot record or read. The error never holds a tenant's or a
// lease's value.
var ErrInvalidEntry = errors.New("ledger: invalid entry")

// Tokens are the tokens of a call as its provider reported them.
type Tokens struct {
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

// TokensOf returns the ledger's tokens of usage u.
func TokensOf(u capacity.Usage) Tokens {
	return Tokens{
		Input:       u.InputTokens + u.CacheCreationInputTokens,
		CachedInput: u.CacheReadInputTokens,
		Output:      u.OutputTokens + u.ExtraReasoningTokens,
	}
}

// Add returns t plus o.
func (t Tokens) Add(o Tokens) Tokens {
	return Tokens{Input: t.Input + o.Input, CachedInput: t.CachedInput + o.CachedInput, Output: t.Output + o.Output}
}

// Entry is one settled call, as the gate records it.
type Entry struct {
	// Lease is the call's lease id (Lease.ID): a lease is recorded once.
	Lease string
	// Day is the day window the call was admitted in (Day).
	Day string
	// Scope is the call's quota scope; its CredentialKey is the connection.
	Scope capacity.Scope
	// Tenant is the call's fairness key (ValidateFairnessKey); empty for a
	// call without one.
	Tenant string
	// WorkflowType is the type of the workflow that made the call
	// (ValidateKind); empty if unknown.
	WorkflowType string
	// Tokens are the call's tokens as the provider reported them.
	Tokens Tokens
	// Cost is what the tokens cost (spend.Price.Cost), in the prices' unit; zero when
	// Unpriced.
	Cost float64
	// Unpriced reports that the prices had no price for the call's model: its
	// tokens are recorded, its cost is zero, and its row counts it.
	Unpriced bool
}

// Validate reports whether e can be recorded.
func (e Entry) Validate() error {
	if e.Lease == "" || len(e.Lease) > MaxLeaseIDLength {
		return fmt.Errorf("%w: Lease is %d bytes; want 1 to %d", ErrInvalidEntry, len(e.Lease), MaxLeaseIDLength)
	}
	if err := ValidateDay(e.Day); err != nil {
		return err
	}
	if err := e.Scope.Validate(); err != nil {
		return err
	}
	if err := capacity.ValidateFairnessKey(e.Tenant); err != nil {
		return fmt.Errorf("%w: Tenant: %w", ErrInvalidEntry, err)
	}
	if e.WorkflowType != "" {
		if err := capacity.ValidateKind(e.WorkflowType); err != nil {
			return fmt.Errorf("%w: WorkflowType: %w", ErrInvalidEntry, err)
		}
	}
	if e.Tokens.Input < 0 || e.Tokens.CachedInput < 0 || e.Tokens.Output < 0 {
		return fmt.Errorf("%w: negative token count", ErrInvalidEntry)
	}
	if math.IsNaN(e.Cost) || math.IsInf(e.Cost, 0) || e.Cost < 0 || e.Unpriced && e.Cost != 0 {
		return fmt.Errorf("%w: Cost is %v; want a finite number >= 0, and 0 when Unpriced", ErrInvalidEntry, e.Cost)
	}
	return nil
}

// Row is what the calls of one day, scope, tenant and workflow type
// used and cost.
type Row struct {
	Day          string         `json:"day"`
	Scope        capacity.Scope `json:"-"`
	Tenant       string         `json:"tenant"`
	WorkflowType string         `json:"workflow_type"`
	// Calls counts the calls recorded; Unpriced those among them whose
	// model had no price (their cost is not in Cost).
	Calls    int64 `json:"calls"`
	Unpriced int64 `json:"unpriced_calls"`
	Tokens
	Cost float64 `json:"cost"`
}

// Spend is what a tenant and a connection spent in one day.
type Spend struct {
	Tenant, Connection float64
}

// ValidateDay reports whether day is a ledger day: a date laid out as
// DayLayout.
func ValidateDay(day string) error {
	if _, err := time.Parse(DayLayout, day); err != nil || len(day) != len(DayLayout) {
		return fmt.Errorf("%w: day %q is not a date laid out as %s", ErrInvalidEntry, day, DayLayout)
	}
	return nil
}

// Day returns the ledger day of the day window of b that holds t (the
// date the window starts on, in b's location) and the window's end, when
// the day's spend caps reset.
func Day(t time.Time, b capacity.DayBoundary) (day string, end time.Time) {
	end = b.Next(t)
	loc := b.Location
	if loc == nil {
		loc = time.UTC
	}
	y, m, d := end.Add(-b.Offset).In(loc).Date()
	return time.Date(y, m, d-1, 0, 0, 0, 0, time.UTC).Format(DayLayout), end
}

// checkEntry validates the arguments of Ledger.Record.
func checkEntry(ctx context.Context, e Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return e.Validate()
}

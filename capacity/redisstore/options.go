package redisstore

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// DefaultPrefix is the default Options.Prefix.
const DefaultPrefix = "tollgate"

// DefaultProbeInterval is the default Options.ProbeInterval.
const DefaultProbeInterval = 500 * time.Millisecond

// FailurePolicy says what a Store does while Redis cannot be reached.
type FailurePolicy int

const (
	// FailClosed refuses admission: every operation returns an error wrapping
	// capacity.ErrStoreUnavailable and nothing is dispatched blind. It is the
	// default.
	FailClosed FailurePolicy = iota
	// FallbackLocal admits from a local capacity.MemoryStore whose limits are
	// the requested ones scaled by Options.FallbackFraction. Leases it grants
	// are settled, released and renewed locally; Redis never learns of them.
	FallbackLocal
)

func (p FailurePolicy) String() string {
	switch p {
	case FailClosed:
		return "fail_closed"
	case FallbackLocal:
		return "fallback_local"
	}
	return fmt.Sprintf("failure_policy(%d)", int(p))
}

// Engine says how a Store decides its operations.
type Engine int

const (
	// EngineRecords starts each new scope on the records engine, which
	// decides each operation in the worker, with the memory store's rules,
	// on a copy of the scope that one short script keeps in step with the
	// scope's records in Redis (decision 0008): a batch of a worker's
	// operations on a scope costs Redis one script call that writes what
	// changed, or two when another worker wrote first. It is the default.
	// A scope keeps the engine that holds its state until it rests,
	// whatever the Engine of the workers that use it (the package doc, The
	// records engine).
	EngineRecords Engine = iota
	// EngineScripts starts each new scope on the scripts (lua/), which
	// decide each operation in Redis: the default of the versions up to
	// scripts 6.4. Set it while workers of scripts 6.3 or earlier share
	// the Prefix (the package doc, The records engine).
	EngineScripts
)

func (e Engine) String() string {
	switch e {
	case EngineScripts:
		return "scripts"
	case EngineRecords:
		return "records"
	}
	return fmt.Sprintf("engine(%d)", int(e))
}

// MarshalText returns e's name ("scripts", "records").
func (e Engine) MarshalText() ([]byte, error) {
	if e != EngineScripts && e != EngineRecords {
		return nil, fmt.Errorf("%w: Engine is %v", ErrInvalidOptions, e)
	}
	return []byte(e.String()), nil
}

// UnmarshalText sets e from its name, for flags and configuration files.
func (e *Engine) UnmarshalText(text []byte) error {
	for _, v := range []Engine{EngineRecords, EngineScripts} {
		if string(text) == v.String() {
			*e = v
			return nil
		}
	}
	return fmt.Errorf("%w: Engine %q; want scripts or records", ErrInvalidOptions, text)
}

// Options configures a Store. The zero value is valid: prefix "tollgate",
// Redis time, fail closed.
type Options struct {
	// Prefix begins every key and channel name, inside the hash tag. If empty,
	// DefaultPrefix. It may not contain '{' or '}'.
	Prefix string
	// OnUnavailable is the policy while Redis cannot be reached. If zero,
	// FailClosed.
	OnUnavailable FailurePolicy
	// FallbackFraction scales every limit of the local fallback budget
	// (FallbackLocal only): each worker admits at most this fraction of each
	// rate, burst, daily allowance and in-flight cap on its own (at least 1
	// of each). Set it to at most 1 / the number of workers sharing a scope.
	// Required with FallbackLocal; must be in (0, 1].
	FallbackFraction float64
	// ProbeInterval is how long the store stops trying Redis after it found
	// it unreachable; calls in between fail (or fall back) at once. If zero,
	// DefaultProbeInterval.
	ProbeInterval time.Duration
	// TicketGrace is how long a booked ticket waits past its time, or the
	// later time its call was told, for its call before it lapses. If zero,
	// capacity.DefaultLeaseTTL.
	TicketGrace time.Duration
	// Clock, if set, replaces Redis TIME as the store's clock: its Now is
	// sent with every script (the store never uses its timers). If nil,
	// Redis TIME. For tests only (the contract suite's manual clock); in
	// production the Redis server is the one clock every worker agrees on.
	Clock capacity.Clock
	// Engine is the engine the store starts a new scope on. If zero,
	// EngineRecords.
	Engine Engine
	// Logger receives warnings: Redis unreachable, state found lost. If nil,
	// nothing is logged.
	Logger *slog.Logger
}

// ErrInvalidOptions is returned (wrapped) by New for invalid Options.
var ErrInvalidOptions = errors.New("redisstore: invalid options")

// withDefaults validates o and fills its defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(o.Prefix, "{}") {
		return o, fmt.Errorf("%w: Prefix %q contains '{' or '}' (it sits inside the hash tag)", ErrInvalidOptions, o.Prefix)
	}
	switch o.OnUnavailable {
	case FailClosed:
		if o.FallbackFraction != 0 {
			return o, fmt.Errorf("%w: FallbackFraction is set but OnUnavailable is %v; set OnUnavailable to FallbackLocal", ErrInvalidOptions, o.OnUnavailable)
		}
	case FallbackLocal:
		f := o.FallbackFraction
		if f == 0 {
			return o, fmt.Errorf("%w: FallbackLocal needs FallbackFraction, at most 1 / the number of workers", ErrInvalidOptions)
		}
		if math.IsNaN(f) || f < 0 || f > 1 {
			return o, fmt.Errorf("%w: FallbackFraction is %v; want in (0, 1]", ErrInvalidOptions, f)
		}
	default:
		return o, fmt.Errorf("%w: OnUnavailable is %v", ErrInvalidOptions, o.OnUnavailable)
	}
	if o.Engine != EngineScripts && o.Engine != EngineRecords {
		return o, fmt.Errorf("%w: Engine is %v", ErrInvalidOptions, o.Engine)
	}
	if o.ProbeInterval < 0 {
		return o, fmt.Errorf("%w: ProbeInterval is %v; want >= 0 (0 means %v)", ErrInvalidOptions, o.ProbeInterval, DefaultProbeInterval)
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = DefaultProbeInterval
	}
	if o.TicketGrace < 0 {
		return o, fmt.Errorf("%w: TicketGrace is %v; want >= 0 (0 means %v)", ErrInvalidOptions, o.TicketGrace, capacity.DefaultLeaseTTL)
	}
	if o.TicketGrace == 0 {
		o.TicketGrace = capacity.DefaultLeaseTTL
	}
	return o, nil
}

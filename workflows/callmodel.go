package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/interceptor"
)

// Defaults of Options.
const (
	DefaultScheduleToClose = time.Hour
	DefaultStartToClose    = 5 * time.Minute
	DefaultHeartbeat       = 30 * time.Second
)

// Call is one model-call activity to run: its registered name and its input
// (which implements interceptor.ModelCall, so the gate sees it).
type Call struct {
	Activity string
	Input    any
}

// Options says how CallModel schedules model calls and recovers from the
// failures the gate reports. The zero value is usable.
type Options struct {
	// TaskQueues maps a class to its task queue, so interactive and bulk
	// work can run on separate workers. A class not in it uses the
	// workflow's task queue.
	TaskQueues map[capacity.Class]string
	// Priorities maps a class to a Temporal priority key (1 is highest). If
	// nil, Interactive 1, Standard 3, Bulk 5.
	Priorities map[capacity.Class]int
	// ScheduleToClose bounds one call across all its attempts, waits
	// included. If zero, DefaultScheduleToClose.
	ScheduleToClose time.Duration
	// StartToClose bounds one attempt. If zero, DefaultStartToClose.
	StartToClose time.Duration
	// Heartbeat is the heartbeat timeout (the gate heartbeats while a call
	// waits or runs). If zero, DefaultHeartbeat; negative means none.
	Heartbeat time.Duration
	// SleepUntilReset makes CallModel sleep durably until an exhausted
	// quota resets, when that is at most this far away, and try again.
	// Zero never sleeps.
	SleepUntilReset time.Duration
	// PauseSignal, if set, makes CallModel wait for a signal of this name
	// when a quota is exhausted with no reset in reach (a spent credit
	// balance, a revoked key): a person fixes it and signals, and the call
	// is tried again. Without it, the error is returned.
	PauseSignal string
	// MaxRecoveries bounds the sleeps and pauses of one CallModel. If zero,
	// 3.
	MaxRecoveries int
	// ClassName, if set, names the class the gate ranks the calls by in
	// place of CallModel's class: a class of the workers'
	// interceptor.Options.Classes (interceptor.WithClassName). CallModel's
	// class still picks the task queue and priority key.
	ClassName string
	// FairnessKey is the calls' fairness key (a tenant, a customer, a
	// workflow type: a name, never a secret; capacity.ValidateFairnessKey,
	// at most MaxFairnessKeyLength bytes). CallModel carries it to the gate
	// (interceptor.WithFairnessKey), which shares its class's capacity
	// among keys by weight in tokens, and sets it as the activity's
	// temporal.Priority.FairnessKey, so Temporal's matching dispatches the
	// tasks of a backlogged queue by the same key (where the server's
	// fairness feature is on). If empty, the key set on the workflow
	// context with interceptor.WithFairnessKey, if any.
	FairnessKey string
	// FairnessWeight is the key's weight in Temporal's matching
	// (temporal.Priority.FairnessWeight; the server clamps it to
	// [0.001, 1000]). Set it to the key's weight in the workers'
	// interceptor.Options.Fairness, so task dispatch and admission agree.
	// If zero, Temporal's default: the task queue's configured weight for
	// the key, else 1.
	FairnessWeight float32
}

// MaxFairnessKeyLength is the longest Options.FairnessKey, in bytes:
// Temporal's limit on a priority's fairness key (the gate allows longer,
// capacity.MaxFairnessKeyLength).
const MaxFairnessKeyLength = 64

// ErrInvalidOptions is returned (wrapped) by CallModel for options it
// cannot use. The error never holds the fairness key's value.
var ErrInvalidOptions = errors.New("workflows: invalid options")

// validate reports whether o can be used.
func (o Options) validate() error {
	if err := capacity.ValidateFairnessKey(o.FairnessKey); err != nil {
		return fmt.Errorf("%w: FairnessKey: %v", ErrInvalidOptions, err)
	}
	if len(o.FairnessKey) > MaxFairnessKeyLength {
		return fmt.Errorf("%w: FairnessKey is %d bytes; Temporal's matching takes at most %d", ErrInvalidOptions, len(o.FairnessKey), MaxFairnessKeyLength)
	}
	if !(o.FairnessWeight >= 0) {
		return fmt.Errorf("%w: FairnessWeight is %v; want 0 (Temporal's default) or more", ErrInvalidOptions, o.FairnessWeight)
	}
	return nil
}

func (o Options) priority(c capacity.Class) int {
	if p, ok := o.Priorities[c]; ok {
		return p
	}
	switch c {
	case capacity.Interactive:
		return 1
	case capacity.Bulk:
		return 5
	}
	return 3
}

// ActivityOptions returns the activity options a model call of class needs:
// unlimited attempts bounded by a schedule-to-close timeout (every rate-limit
// wait costs an attempt; the gate counts real failures itself), the class's
// task queue and priority, the fairness key and weight (FairnessKey,
// FairnessWeight) for Temporal's matching, and a heartbeat timeout.
func (o Options) ActivityOptions(class capacity.Class) workflow.ActivityOptions {
	ao := workflow.ActivityOptions{
		TaskQueue:              o.TaskQueues[class],
		ScheduleToCloseTimeout: o.ScheduleToClose,
		StartToCloseTimeout:    o.StartToClose,
		HeartbeatTimeout:       o.Heartbeat,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 0},
		Priority: temporal.Priority{
			PriorityKey: o.priority(class), FairnessKey: o.FairnessKey, FairnessWeight: o.FairnessWeight,
		},
	}
	if ao.ScheduleToCloseTimeout == 0 {
		ao.ScheduleToCloseTimeout = DefaultScheduleToClose
	}
	if ao.StartToCloseTimeout == 0 {
		ao.StartToCloseTimeout = DefaultStartToClose
	}
	switch {
	case ao.HeartbeatTimeout == 0:
		ao.HeartbeatTimeout = DefaultHeartbeat
	case ao.HeartbeatTimeout < 0:
		ao.HeartbeatTimeout = 0
	}
	return ao
}

// ErrNoCalls is returned by CallModel for an empty chain.
var ErrNoCalls = errors.New("workflows: CallModel needs at least one call")

// ErrNotModelCall is returned (wrapped) by CallModel for a call whose input
// does not implement interceptor.ModelCall: the gate would let it through
// ungated. The commonest cause is a TollgateCall with a pointer receiver on
// an input passed as a value.
var ErrNotModelCall = errors.New("workflows: the call's input does not implement interceptor.ModelCall")

// checkModelCalls refuses a chain with an input the gate would not see as a
// model call.
func checkModelCalls(chain []Call) error {
	for i, c := range chain {
		if _, ok := c.Input.(interceptor.ModelCall); ok {
			continue
		}
		if interceptor.PointerModelCall(c.Input) {
			return fmt.Errorf("%w: call %d (%s): %T has TollgateCall with a pointer receiver; declare it on the value type, or pass a pointer to an activity that takes one",
				ErrNotModelCall, i, c.Activity, c.Input)
		}
		return fmt.Errorf("%w: call %d (%s): %T", ErrNotModelCall, i, c.Activity, c.Input)
	}
	return nil
}

// CallModel runs a model call of class and owns its recovery. The class is
// stated here once: it picks the task queue and priority, and the plugin
// carries it to the gate in the activity's header (interceptor.WithClass, or
// WithClassName with Options.ClassName), so each request's own class may be
// left unset; one that disagrees fails with tollgate.Misconfigured. The
// fairness key (Options.FairnessKey) goes the same way, and into the
// activity's Temporal priority. The workflow's worker needs the plugin too
// (CallModel logs a warning without it). Options that cannot be used
// return an ErrInvalidOptions error before anything is scheduled. chain is a
// fallback chain: the first call is tried; when it fails in a way another
// connection may not (an exhausted quota, a refused credential, no access to
// the model, a provider overloaded past the call's deadline), the next one
// is tried. Before falling back, an exhausted quota that resets within
// Options.SleepUntilReset is waited out with a durable timer, and, with
// Options.PauseSignal, a quota with no reset in reach pauses the workflow
// until the signal. Errors that no connection can fix (a bad request, a
// context too long) are returned at once: split or change the input. Every
// input must implement interceptor.ModelCall, as it is given (a
// TollgateCall with a pointer receiver needs a pointer): CallModel refuses
// a chain with one that does not (ErrNotModelCall) before scheduling
// anything, since the gate would let it through ungated.
//
// It returns the index in chain of the call that succeeded, with its result
// decoded into result, or the last error as the workflow saw it (use the
// tgerrors predicates and tgerrors.DetailsOf on it).
func CallModel(ctx workflow.Context, opts Options, class capacity.Class, chain []Call, result any) (int, error) {
	if len(chain) == 0 {
		return -1, ErrNoCalls
	}
	if err := checkModelCalls(chain); err != nil {
		return -1, err
	}
	if opts.FairnessKey == "" {
		opts.FairnessKey, _ = interceptor.FairnessKeyOf(ctx)
	}
	if err := opts.validate(); err != nil {
		return -1, err
	}
	maxRecoveries := opts.MaxRecoveries
	if maxRecoveries <= 0 {
		maxRecoveries = 3
	}
	logger := workflow.GetLogger(ctx)
	if (class != capacity.Standard || opts.ClassName != "" || opts.FairnessKey != "") && !interceptor.Propagates(ctx) {
		logger.Warn("tollgate: the workflow's worker has no tollgate plugin, so the gate sees only each request's own class and fairness key",
			"class", class.String(), "class_name", opts.ClassName)
	}
	actx := interceptor.WithClass(ctx, class)
	if opts.ClassName != "" {
		actx = interceptor.WithClassName(ctx, opts.ClassName)
	}
	if opts.FairnessKey != "" {
		actx = interceptor.WithFairnessKey(actx, opts.FairnessKey)
	}
	actx = workflow.WithActivityOptions(actx, opts.ActivityOptions(class))
	recoveries := 0
	var err error
	for i := 0; i < len(chain); i++ {
		err = workflow.ExecuteActivity(actx, chain[i].Activity, chain[i].Input).Get(ctx, result)
		if err == nil {
			return i, nil
		}
		switch {
		case tgerrors.IsContextTooLong(err), tgerrors.IsBadRequest(err), tgerrors.IsMisconfigured(err):
			return i, err // the input or the setup must change, not the connection
		case tgerrors.IsQuotaExhausted(err):
			d, _ := tgerrors.DetailsOf(err)
			wait := d.ResetAt.Sub(workflow.Now(ctx))
			if opts.SleepUntilReset > 0 && !d.ResetAt.IsZero() && wait <= opts.SleepUntilReset && recoveries < maxRecoveries {
				recoveries++
				logger.Info("tollgate: quota exhausted; sleeping until it resets", "scope", d.Scope, "reset", d.ResetAt)
				if serr := workflow.Sleep(ctx, max(wait, time.Second)); serr != nil {
					return i, serr
				}
				i-- // the same call again
				continue
			}
			if i+1 < len(chain) {
				continue // fall back
			}
			if opts.PauseSignal != "" && recoveries < maxRecoveries {
				recoveries++
				logger.Warn("tollgate: quota exhausted; paused until signalled", "scope", d.Scope, "signal", opts.PauseSignal)
				workflow.GetSignalChannel(ctx, opts.PauseSignal).Receive(ctx, nil)
				i = -1 // the whole chain again
				continue
			}
			return i, err
		case tgerrors.IsBadCredential(err), tgerrors.IsNoAccess(err), tgerrors.IsDeadlineUnmeetable(err),
			tgerrors.IsOverloaded(err), tgerrors.IsTransient(err), tgerrors.IsRateLimited(err), tgerrors.IsCapacityWait(err):
			if i+1 < len(chain) {
				continue // fall back
			}
			if tgerrors.IsBadCredential(err) && opts.PauseSignal != "" && recoveries < maxRecoveries {
				recoveries++
				logger.Warn("tollgate: credential refused; paused until signalled", "signal", opts.PauseSignal)
				workflow.GetSignalChannel(ctx, opts.PauseSignal).Receive(ctx, nil)
				i = -1
				continue
			}
			return i, err
		default:
			var canceled *temporal.CanceledError
			if errors.As(err, &canceled) || ctx.Err() != nil {
				return i, err
			}
			if i+1 < len(chain) {
				continue
			}
			return i, err
		}
	}
	return len(chain) - 1, fmt.Errorf("workflows: every call of the chain failed: %w", err)
}

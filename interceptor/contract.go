package interceptor

import (
	"context"
	"net/http"
	"sync"

	"go.temporal.io/sdk/activity"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Call describes one model call to the gate: which quota it draws on, what it
// is estimated to cost, and how urgent it is. It carries names, never secrets
// or prompt text.
type Call struct {
	Provider capacity.Provider
	// Model is the model name; Options.LimitGroups maps it to its limit group.
	Model string
	// Credential is the credential scope name the worker resolves to a key.
	Credential string
	// Region is optional.
	Region string
	// Demand is the estimated cost (input tokens, output to reserve,
	// max_tokens).
	Demand capacity.Demand
	// Class ranks the call (interactive work is protected from bulk). The
	// workflow's class (WithClass, as workflows.CallModel sets it) takes its
	// place; leave it zero (Standard) or equal to the workflow's: a
	// disagreeing class fails the call with tollgate.Misconfigured. With
	// Options.Classes it is read by its name, which must be defined there.
	Class capacity.Class
	// ClassName names the call's class: a built-in class or one of
	// Options.Classes; the way an activity names a user-defined class. The
	// same rule as Class applies: the workflow's class (WithClassName)
	// takes its place, and a ClassName that differs from it, or from a
	// Class other than Standard, or that names no class the gate knows,
	// fails the call with tollgate.Misconfigured. Empty: not stated.
	ClassName string
	// FairnessKey is the call's fairness key: a tenant, a customer, a
	// workflow type (capacity.ValidateFairnessKey); a name that may appear
	// in metrics, never a secret. While calls of several keys of one class
	// wait on a scope, they are granted by the keys' weights
	// (Options.Fairness) in the tokens they are charged. The workflow's key
	// (WithFairnessKey, as workflows.CallModel sets it) takes its place;
	// leave it empty or equal to the workflow's: a disagreeing key fails
	// the call with tollgate.Misconfigured. Empty: the class's shared key.
	FairnessKey string
	// UsageKey names the kind of call whose usage the gate learns
	// (Options.Learning): calls of one kind on one scope share one learned
	// output distribution. If empty, the activity type. A name such as
	// "summarize" (capacity.ValidateKind), never prompt text: a key it
	// refuses makes the call learn nothing.
	UsageKey string
}

// ModelCall is implemented by the first argument of a model-call activity.
// The default Options.Resolve gates every activity whose first argument
// implements it and lets every other activity through untouched.
type ModelCall interface {
	TollgateCall() Call
}

// Report is what a model-call activity tells the gate about its call.
type Report struct {
	// Usage is the provider-reported usage; HasUsage says it is present.
	Usage    capacity.Usage
	HasUsage bool
	// Header is the response's headers (rate-limit headers are read).
	Header http.Header
	// NotSent says the request never reached the provider (for example the
	// activity failed while building it): the reservation is refunded.
	NotSent bool
}

// ModelResult is implemented by results of model-call activities that carry
// their usage and response headers. An activity whose result does not
// implement it can call SetReport instead.
type ModelResult interface {
	TollgateReport() Report
}

type reportKey struct{}

// reporter holds what the activity reported through SetReport.
type reporter struct {
	mu     sync.Mutex
	report Report
	set    bool
}

// SetReport records r for the gated call running under ctx: usage, headers,
// or that the request was never sent. It is how an activity reports on a
// failed call, or on a success whose result is not a ModelResult. It is a
// no-op outside a gated activity. A later SetReport replaces an earlier one.
func SetReport(ctx context.Context, r Report) {
	rep, ok := ctx.Value(reportKey{}).(*reporter)
	if !ok {
		return
	}
	rep.mu.Lock()
	rep.report, rep.set = r, true
	rep.mu.Unlock()
}

func (r *reporter) get() (Report, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.report, r.set
}

// defaultResolve gates activities whose first argument implements ModelCall.
func defaultResolve(_ context.Context, _ activity.Info, args []any) (Call, bool, error) {
	if len(args) == 0 {
		return Call{}, false, nil
	}
	mc, ok := args[0].(ModelCall)
	if !ok {
		return Call{}, false, nil
	}
	return mc.TollgateCall(), true, nil
}

// Gated reports whether ctx belongs to an activity the gate is running: an
// activity that returns provider errors as they are (for the gate to
// classify) can convert them itself when it runs ungated.
func Gated(ctx context.Context) bool {
	_, ok := ctx.Value(reportKey{}).(*reporter)
	return ok
}

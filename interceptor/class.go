package interceptor

import (
	"context"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/capacity"
)

// ClassHeader is the Temporal header in which the plugin carries a model
// call's class from the workflow that schedules it to the gate. Its value is
// the class's name: a built-in class ("interactive", "standard", "bulk") or
// one of Options.Classes.
const ClassHeader = "tollgate-class"

// FairnessKeyHeader is the Temporal header in which the plugin carries a
// model call's fairness key (WithFairnessKey) from the workflow that
// schedules it to the gate.
const FairnessKeyHeader = "tollgate-fairness-key"

type (
	classKey       struct{}
	fairnessCtxKey struct{}
	pluginKey      struct{}
)

// WithClass returns a copy of ctx whose activities run as model calls of
// built-in class c: the plugin, on the worker that runs the workflow, writes
// c's name into the ClassHeader of every activity and local activity
// scheduled with the copy, and the gate ranks the call by it. A call's own
// Call.Class may be left zero (Standard); set to another class than c, the
// call fails non-retryable with tollgate.Misconfigured. workflows.CallModel
// calls WithClass with its class. It is WithClassName(ctx, c.String()).
func WithClass(ctx workflow.Context, c capacity.Class) workflow.Context {
	return WithClassName(ctx, c.String())
}

// WithClassName returns a copy of ctx whose activities run as model calls of
// the class named name: a built-in class, or one of the gate's
// Options.Classes. The plugin writes name into the ClassHeader of every
// activity and local activity scheduled with the copy (an empty name states
// none). A call's own class (Call.ClassName, or Call.Class other than
// Standard) must name the same class, and the gate must know the name:
// otherwise the call fails non-retryable with tollgate.Misconfigured. The
// name is checked on the gate, not here.
func WithClassName(ctx workflow.Context, name string) workflow.Context {
	return workflow.WithValue(ctx, classKey{}, name)
}

// ClassOf returns the built-in class WithClass (or WithClassName with a
// built-in class's name) set on ctx; ok is false if none was.
func ClassOf(ctx workflow.Context) (c capacity.Class, ok bool) {
	name, ok := ClassNameOf(ctx)
	if !ok {
		return 0, false
	}
	return builtinClass(name)
}

// ClassNameOf returns the class name WithClass or WithClassName set on ctx;
// ok is false if none (or an empty one) was.
func ClassNameOf(ctx workflow.Context) (name string, ok bool) {
	name, _ = ctx.Value(classKey{}).(string)
	return name, name != ""
}

// WithFairnessKey returns a copy of ctx whose activities are model calls of
// fairness key key (a tenant, a customer, a workflow type: a name, never a
// secret; capacity.ValidateFairnessKey): the plugin, on the worker that runs
// the workflow, writes key into the FairnessKeyHeader of every activity and
// local activity scheduled with the copy, and the gate places the call in
// the fair queuing of its class under it (Options.Fairness gives the key's
// weight and caps). A call's own Call.FairnessKey may be left empty; set to
// another key, the call fails non-retryable with tollgate.Misconfigured, as
// does a key the gate refuses. An empty key states none: the call's own
// Call.FairnessKey applies. workflows.CallModel calls it with
// workflows.Options.FairnessKey.
func WithFairnessKey(ctx workflow.Context, key string) workflow.Context {
	return workflow.WithValue(ctx, fairnessCtxKey{}, key)
}

// FairnessKeyOf returns the fairness key WithFairnessKey set on ctx; ok is
// false if none (or an empty one) was.
func FairnessKeyOf(ctx workflow.Context) (key string, ok bool) {
	key, _ = ctx.Value(fairnessCtxKey{}).(string)
	return key, key != ""
}

// Propagates reports whether the plugin intercepts the workflow of ctx, so
// the class and fairness key set with WithClass, WithClassName and
// WithFairnessKey reach the gate. Without the plugin on the workflow's
// worker the gate sees only each call's own Call.Class, Call.ClassName and
// Call.FairnessKey.
func Propagates(ctx workflow.Context) bool {
	return ctx.Value(pluginKey{}) != nil
}

// InterceptWorkflow puts the class and fairness key set on the workflow
// context into the header of the activities the workflow schedules.
func (w *workerInterceptor) InterceptWorkflow(ctx workflow.Context, next sdkinterceptor.WorkflowInboundInterceptor) sdkinterceptor.WorkflowInboundInterceptor {
	i := &workflowInbound{}
	i.Next = next
	return i
}

type workflowInbound struct {
	sdkinterceptor.WorkflowInboundInterceptorBase
}

func (i *workflowInbound) Init(outbound sdkinterceptor.WorkflowOutboundInterceptor) error {
	o := &workflowOutbound{}
	o.Next = outbound
	return i.Next.Init(o)
}

func (i *workflowInbound) ExecuteWorkflow(ctx workflow.Context, in *sdkinterceptor.ExecuteWorkflowInput) (any, error) {
	return i.Next.ExecuteWorkflow(workflow.WithValue(ctx, pluginKey{}, true), in)
}

func (i *workflowInbound) ExecuteUpdate(ctx workflow.Context, in *sdkinterceptor.UpdateInput) (any, error) {
	return i.Next.ExecuteUpdate(workflow.WithValue(ctx, pluginKey{}, true), in)
}

type workflowOutbound struct {
	sdkinterceptor.WorkflowOutboundInterceptorBase
}

func (o *workflowOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	setHeaders(ctx)
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

func (o *workflowOutbound) ExecuteLocalActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	setHeaders(ctx)
	return o.Next.ExecuteLocalActivity(ctx, activityType, args...)
}

// setHeaders writes the class and fairness key of ctx, if any, into the
// header of the activity being scheduled.
func setHeaders(ctx workflow.Context) {
	h := sdkinterceptor.WorkflowHeader(ctx)
	if h == nil {
		return
	}
	if name, ok := ClassNameOf(ctx); ok {
		setHeader(h, ClassHeader, name)
	}
	if key, ok := FairnessKeyOf(ctx); ok {
		setHeader(h, FairnessKeyHeader, key)
	}
}

func setHeader(h map[string]*commonpb.Payload, name, value string) {
	p, err := converter.GetDefaultDataConverter().ToPayload(value)
	if err != nil {
		return // a string always converts
	}
	h[name] = p
}

// headerString returns the string in the activity's header name; ok is
// false if it has none.
func headerString(ctx context.Context, name string) (s string, ok bool, err error) {
	p := sdkinterceptor.Header(ctx)[name]
	if p == nil {
		return "", false, nil
	}
	if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
		return "", false, misconfigured(fmt.Sprintf("reading the %s header: %v", name, err))
	}
	return s, true, nil
}

// builtinClass returns the built-in class named name.
func builtinClass(name string) (capacity.Class, bool) {
	for _, c := range capacity.Classes() {
		if c.String() == name {
			return c, true
		}
	}
	return 0, false
}

// callClass is a call's class as the gate ranks it: the class's index (in
// Options.Classes, or a built-in class) and name.
type callClass struct {
	c    capacity.Class
	name string
}

// ownClassName is the class a call names itself: Call.ClassName, else the
// name of Call.Class other than Standard (the zero value, so "not set");
// "" if neither. A ClassName and a Class that disagree are misconfigured.
func ownClassName(call Call) (string, error) {
	own := ""
	if call.Class != capacity.Standard {
		own = call.Class.String()
	}
	switch {
	case call.ClassName == "":
		return own, nil
	case own != "" && own != call.ClassName:
		return "", misconfigured(fmt.Sprintf("the request's Class is %s but its ClassName is %q: state one", own, call.ClassName))
	}
	return call.ClassName, nil
}

// resolveClass returns the class the gate ranks a call by: the workflow's
// (ClassHeader) if it stated one, else the call's own (ownClassName), else
// the default class (Standard; with Options.Classes, the class named
// "standard" if defined, else the first). A call's own class must agree
// with the workflow's, and every name must name a class the gate knows.
func (o *Options) resolveClass(ctx context.Context, call Call) (callClass, error) {
	own, err := ownClassName(call)
	if err != nil {
		return callClass{}, err
	}
	name, ok, err := headerString(ctx, ClassHeader)
	if err != nil {
		return callClass{}, err
	}
	switch {
	case !ok || name == "":
		name = own
	case own != "" && own != name:
		return callClass{}, misconfigured(fmt.Sprintf("the request's class is %s but its workflow scheduled it as %s: "+
			"state the class once, in workflows.CallModel (or interceptor.WithClass / WithClassName), and leave the request's class unset", own, name))
	}
	if name == "" {
		return o.defaultClass(), nil
	}
	var c capacity.Class
	if o.classes != nil {
		c, ok = o.classes.Lookup(name)
	} else {
		c, ok = builtinClass(name)
	}
	if !ok {
		return callClass{}, misconfigured(fmt.Sprintf("no class named %q: the gate knows %v (Options.Classes)", name, o.classNames()))
	}
	return callClass{c: c, name: name}, nil
}

// defaultClass is the class of a call that names none: Standard, or with
// Options.Classes the class named "standard" if defined, else the first.
func (o *Options) defaultClass() callClass {
	if o.classes == nil {
		return callClass{c: capacity.Standard, name: capacity.Standard.String()}
	}
	c, ok := o.classes.Lookup(capacity.Standard.String())
	if !ok {
		c = 0
	}
	return callClass{c: c, name: o.classes.Name(c)}
}

// classNames lists the names of the classes the gate knows.
func (o *Options) classNames() []string {
	var names []string
	if o.classes == nil {
		for _, c := range capacity.Classes() {
			names = append(names, c.String())
		}
		return names
	}
	for c := range capacity.Class(o.classes.Len()) {
		names = append(names, o.classes.Name(c))
	}
	return names
}

// resolveFairnessKey returns the fairness key the gate places a call under:
// the workflow's (FairnessKeyHeader) if it stated one, else the call's own.
// A call's own key must be empty or agree with the workflow's, and the key
// must be valid (capacity.ValidateFairnessKey).
func resolveFairnessKey(ctx context.Context, own string) (string, error) {
	if err := capacity.ValidateFairnessKey(own); err != nil {
		return "", misconfigured("the request's FairnessKey: " + err.Error())
	}
	key, ok, err := headerString(ctx, FairnessKeyHeader)
	if err != nil {
		return "", err
	}
	if err := capacity.ValidateFairnessKey(key); err != nil {
		return "", misconfigured("the " + FairnessKeyHeader + " header: " + err.Error())
	}
	switch {
	case !ok || key == "":
		return own, nil
	case own != "" && own != key:
		return "", misconfigured(fmt.Sprintf("the request's FairnessKey is %q but its workflow scheduled it with key %q: "+
			"state the key once, in workflows.Options.FairnessKey (or interceptor.WithFairnessKey), and leave the request's unset", own, key))
	}
	return key, nil
}

package interceptor

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/capacity"
)

// ClassHeader is the Temporal header in which the plugin carries a model
// call's class from the workflow that schedules it to the gate. Its value is
// the class's name ("interactive", "standard", "bulk").
const ClassHeader = "tollgate-class"

type (
	classKey   struct{}
	pluginKey  struct{}
	classValue struct{ c capacity.Class }
)

// WithClass returns a copy of ctx whose activities run as model calls of
// class c: the plugin, on the worker that runs the workflow, writes c into
// the ClassHeader of every activity and local activity scheduled with the
// copy, and the gate ranks the call by it. A call's own Call.Class may be
// left zero (Standard); set to another class than c, the call fails
// non-retryable with tollgate.Misconfigured. workflows.CallModel calls
// WithClass with its class.
func WithClass(ctx workflow.Context, c capacity.Class) workflow.Context {
	return workflow.WithValue(ctx, classKey{}, classValue{c})
}

// ClassOf returns the class WithClass set on ctx; ok is false if none was.
func ClassOf(ctx workflow.Context) (c capacity.Class, ok bool) {
	v, ok := ctx.Value(classKey{}).(classValue)
	return v.c, ok
}

// Propagates reports whether the plugin intercepts the workflow of ctx, so
// the class WithClass sets reaches the gate. Without the plugin on the
// workflow's worker the gate sees only each call's own Call.Class.
func Propagates(ctx workflow.Context) bool {
	return ctx.Value(pluginKey{}) != nil
}

// InterceptWorkflow puts the class set with WithClass into the header of the
// activities the workflow schedules.
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
	setClassHeader(ctx)
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

func (o *workflowOutbound) ExecuteLocalActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	setClassHeader(ctx)
	return o.Next.ExecuteLocalActivity(ctx, activityType, args...)
}

// setClassHeader writes the class of ctx, if any, into the header of the
// activity being scheduled.
func setClassHeader(ctx workflow.Context) {
	c, ok := ClassOf(ctx)
	if !ok {
		return
	}
	h := sdkinterceptor.WorkflowHeader(ctx)
	if h == nil {
		return
	}
	p, err := converter.GetDefaultDataConverter().ToPayload(c.String())
	if err != nil {
		return // a string always converts
	}
	h[ClassHeader] = p
}

// headerClass returns the class in the activity's ClassHeader; ok is false
// if it has none.
func headerClass(ctx context.Context) (c capacity.Class, ok bool, err error) {
	p := sdkinterceptor.Header(ctx)[ClassHeader]
	if p == nil {
		return 0, false, nil
	}
	var name string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &name); err != nil {
		return 0, false, misconfigured(fmt.Sprintf("reading the %s header: %v", ClassHeader, err))
	}
	for _, c := range capacity.Classes() {
		if c.String() == name {
			return c, true, nil
		}
	}
	return 0, false, misconfigured(fmt.Sprintf("the %s header names no class: %q", ClassHeader, name))
}

// callClass is the class the gate ranks a call by: the workflow's
// (ClassHeader) if it stated one, else the call's own. A call's own class
// other than Standard (the zero value, so "not set") must agree with the
// workflow's.
func callClass(ctx context.Context, own capacity.Class) (capacity.Class, error) {
	c, ok, err := headerClass(ctx)
	if err != nil {
		return own, err
	}
	if !ok {
		return own, nil
	}
	if own != capacity.Standard && own != c {
		return own, misconfigured(fmt.Sprintf("the request's class is %s but its workflow scheduled it as %s: "+
			"state the class once, in workflows.CallModel (or interceptor.WithClass), and leave the request's Class unset", own, c))
	}
	return c, nil
}

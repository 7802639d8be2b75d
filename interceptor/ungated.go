package interceptor

import (
	"context"
	"reflect"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
)

// modelCallType is the ModelCall interface's type, for the reflection that
// finds an input whose pointer implements it.
var modelCallType = reflect.TypeFor[ModelCall]()

// PointerModelCall reports whether v does not implement ModelCall but a
// pointer to it would: TollgateCall has a pointer receiver and v is a
// value, so the gate cannot see v as a model call. Declare TollgateCall on
// the value (or pass and take a pointer).
func PointerModelCall(v any) bool {
	if v == nil {
		return false
	}
	if _, ok := v.(ModelCall); ok {
		return false
	}
	return reflect.PointerTo(reflect.TypeOf(v)).Implements(modelCallType)
}

// ungatedModelCall says why an activity the gate does not gate (Resolve
// said it is no model call) is one all the same: its first argument's
// TollgateCall has a pointer receiver, or the workflow scheduled it as a
// model call (workflows.CallModel, WithClass, WithClassName or
// WithFairnessKey put the class or fairness key into its header). ok is
// false for an activity nothing marks as a model call.
func ungatedModelCall(ctx context.Context, args []any) (why string, ok bool) {
	if len(args) > 0 && PointerModelCall(args[0]) {
		return "its first argument's TollgateCall has a pointer receiver but the activity takes a value: " +
			"declare TollgateCall on the value type", true
	}
	for _, h := range []string{ClassHeader, FairnessKeyHeader} {
		if _, ok, _ := headerString(ctx, h); ok {
			return "the workflow scheduled it as a model call (" + h + " header) but its first argument " +
				"does not implement interceptor.ModelCall", true
		}
	}
	return "", false
}

// ungatedLog logs an ungated model call once per activity type and reason
// on a worker, so the warning is seen without flooding the log; every call
// is counted (tollgate.calls.ungated).
type ungatedLog struct{ seen sync.Map }

func (u *ungatedLog) report(ctx context.Context, logger log.Logger, tel *telemetry, info activity.Info, why string) {
	tel.ungated(ctx, info.ActivityType.Name)
	if _, dup := u.seen.LoadOrStore(info.ActivityType.Name+"\x00"+why, true); dup {
		return
	}
	logger.Warn("tollgate: a model call runs ungated: nothing limits it and its usage is not counted",
		"activity_type", info.ActivityType.Name, "reason", why)
}

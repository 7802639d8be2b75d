// Package workflows holds the workflow side of tollgate: CallModel, which
// schedules a model-call activity with the options the gate needs (unlimited
// attempts bounded by a schedule-to-close timeout, a task queue and priority
// per class, a heartbeat timeout) and owns recovery — a durable sleep until
// an exhausted quota resets, the next connection of a fallback chain, or a
// pause until a person signals.
//
//	var res activities.Result
//	used, err := workflows.CallModel(ctx, workflows.Options{SleepUntilReset: 6 * time.Hour}, capacity.Bulk,
//		[]workflows.Call{
//			{Activity: "Chat", Input: activities.OpenAIChatRequest{Model: "gpt-4o", Credential: "batch", ...}},
//			{Activity: "Messages", Input: activities.AnthropicMessagesRequest{Model: "claude-sonnet-4-5", Credential: "batch", ...}},
//		}, &res)
//
// The class given to CallModel is the call's only class: the tollgate plugin
// on the workflow's worker carries it to the gate (interceptor.WithClass, or
// WithClassName for Options.ClassName), so requests leave their own Class
// unset. Options.FairnessKey goes the same way (interceptor.WithFairnessKey)
// and into the activity's Temporal priority, with Options.FairnessWeight.
//
// CallModel decides only from the error types and details in the workflow's
// history, so it replays deterministically.
package workflows

package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	// The readers of the SDKs these activities call: Classify here and the
	// gate in the worker read their typed errors.
	_ "github.com/tollgate-dev/tollgate/errors/anthropicerr"
	_ "github.com/tollgate-dev/tollgate/errors/geminierr"
	_ "github.com/tollgate-dev/tollgate/errors/openaierr"
	"github.com/tollgate-dev/tollgate/interceptor"
)

// providerError returns a provider failure: as the SDK produced it when the
// gate runs the activity (the gate classifies it and needs its evidence),
// else classified here into a secret-free ApplicationError, never wrapped.
func providerError(ctx context.Context, p capacity.Provider, err error) error {
	if interceptor.Gated(ctx) {
		return err
	}
	return tgerrors.ActivityError(tgerrors.ClassifyContext(ctx, p, err, time.Now()), "")
}

// notSent tells the gate the request never left, so its reservation is
// refunded, and returns err.
func notSent(ctx context.Context, err error) error {
	interceptor.SetReport(ctx, interceptor.Report{NotSent: true})
	return err
}

// malformedAnswer is the error of a call whose provider answered with JSON
// that is not an answer of its kind (want): the SDK decoded it without
// complaint, but there is nothing to return. Like a body that does not
// parse, it is an Unknown failure: retried, and counted by the gate (the
// provider may have charged the call).
func malformedAnswer(op, want string) error {
	return fmt.Errorf("%s: the provider's answer is not %s", op, want)
}

func badRequest(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, tgerrors.TypeBadRequest, nil)
}

func misconfigured(msg string) error {
	return tgerrors.MisconfiguredError(msg)
}

package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/tollgate-dev/tollgate/capacity/redisstore"
)

// keepTextResult is the outcome of `tollgate keep-text`, its -json line.
type keepTextResult struct {
	// Credentials is how many credentials were marked.
	Credentials int `json:"credentials"`
	// For is how long the mark lasts, as given (-for).
	For string `json:"for"`
	// Empty, if set, says why nothing was marked: no credential under the
	// prefix.
	Empty string `json:"empty,omitempty"`
}

const keepTextUsage = `usage: tollgate keep-text [flags]

Makes every scope in the Redis store keep its state in the text form that
workers of tollgate's scripts before 6.0 read, beside the packed form of 6.0,
for -for from now. Each scope writes its text at its next save.

Workers of 6.0 keep the text by themselves for a day after they last found a
state a 5.x worker saved. Run this before rolling back to 5.x later than
that, or before a deploy from 5.x if no 5.x worker has saved lately: a 5.x
worker refuses a scope held only packed ("unknown scope state format").
Only scopes on the scripts have such a state: a scope on the records engine
(redisstore.EngineRecords, now the default) has none for 5.x to read.
While the mark lasts, a 6.0 worker's saves cost Redis about what a 5.x
worker's did. A credential first used after the command is not marked.

examples:
  tollgate keep-text
  tollgate keep-text -for 72h -json

flags:
`

func keepText(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("keep-text", keepTextUsage, stderr, true)
	var rf redisFlags
	rf.register(fs)
	lasts := fs.Duration("for", 24*time.Hour, "how long every scope keeps its text form (at most 720h)")
	asJSON := fs.Bool("json", false, "print the result as one JSON object (keepTextResult: credentials, for)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "tollgate keep-text: takes no arguments")
		fs.Usage()
		return errUsage
	}
	if *lasts <= 0 || *lasts > redisstore.MaxTextStateFor {
		return fmt.Errorf("%w: -for %v: want above 0 and at most %v", errUsage, *lasts, redisstore.MaxTextStateFor)
	}
	ctx, cancel := context.WithTimeout(ctx, rf.timeout)
	defer cancel()
	store, release, err := rf.open(ctx)
	if err != nil {
		return err
	}
	defer release()
	n, err := store.KeepTextState(ctx, *lasts)
	if err != nil {
		return fmt.Errorf("keep-text: %w", err)
	}
	res := keepTextResult{Credentials: n, For: lasts.String()}
	if n == 0 {
		e := rf.empty(ctx, "no credentials", "nothing to mark (a credential is stored once a worker used it)")
		res.Empty = e.Error()
		if *asJSON {
			if err := writeJSON(stdout, res); err != nil {
				return err
			}
		}
		return e
	}
	if *asJSON {
		return writeJSON(stdout, res)
	}
	_, err = fmt.Fprintf(stdout, "%d credentials in %s under prefix %q keep the text state for %s\n", n, rf.where(), rf.prefix, lasts)
	return err
}

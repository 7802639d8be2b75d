// Command tollgate is tollgate's operator CLI.
//
//	tollgate status   [connection] [-json] [-watch 5s] [-classes names] [-pool name=a,b]   live budgets, leases, tickets, blocks, fairness flows and keys per scope; key pools' members
//	tollgate unblock  [connection] [-json] [-credential] SCOPE            lift a scope's block (and its credential's)
//	tollgate advise   [connection] [-json]                                learned output per scope and call kind against max_tokens
//	tollgate cost     [connection] [-json] [-day d] [-tenant t]                tokens and cost per day, scope, tenant and workflow type
//	tollgate simulate [-workload file] [-config file] [-tpm n] ... [-json] [-plot file.svg|.html]   a workload against limits on a simulated clock
//
// The connection flags, shared by every command on the Redis store:
// -redis addr[,addr...], -cluster, -sentinel-master name, -user, -tls,
// -prefix, -timeout. Flags take one dash or two (-json, --json).
// Run a subcommand with -h for its flags and examples.
//
// Exit status: 0 ok, 1 failure, 2 usage, 3 empty (nothing stored under the
// prefix).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/redis/go-redis/v9"
)

func main() {
	redis.SetLogger(quietLogger{}) // the commands say what failed, once
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// quietLogger drops go-redis's own log lines (a retried dial, a lost
// Sentinel): the command reports the error that ends it.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// run is the CLI: it returns the exit status (exitOK, exitFailure,
// exitUsage, exitEmpty).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "status":
		err = status(ctx, args[1:], stdout, stderr)
	case "unblock":
		err = unblock(ctx, args[1:], stdout, stderr)
	case "keep-text":
		err = keepText(ctx, args[1:], stdout, stderr)
	case "advise":
		err = advise(ctx, args[1:], stdout, stderr)
	case "cost":
		err = cost(ctx, args[1:], stdout, stderr)
	case "simulate":
		err = simulate(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	default:
		fmt.Fprintf(stderr, "tollgate: unknown command %q\n", args[0])
		usage(stderr)
		return exitUsage
	}
	return exitStatus(err, stderr)
}

// exitStatus prints err to stderr, if it has something to say, and returns
// the exit status it means.
func exitStatus(err error, stderr io.Writer) int {
	var empty *emptyError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK // the flag set printed the help
	case err == errUsage:
		return exitUsage // the flag set printed why
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "tollgate:", err)
		return exitUsage
	case errors.As(err, &empty):
		fmt.Fprintln(stderr, "tollgate:", err)
		return exitEmpty
	}
	fmt.Fprintln(stderr, "tollgate:", err)
	return exitFailure
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: tollgate <command> [flags]

commands:
  status     live budgets, in-flight leases, booked tickets, blocks, fairness flows and keys of every scope in Redis
  unblock    lift a scope's block (and, with -credential, its credential's) in Redis
  keep-text  keep every scope's state readable by workers of scripts before 6.0 (a rollback, a deploy from 5.x)
  advise     output learned per scope and call kind against max_tokens, and the TPM oversizing costs
  cost       the cost ledger: tokens and cost per day, scope, tenant and workflow type, from Redis
  simulate   run a workload against limits on a simulated clock and report waits and utilization

Connection flags (status, unblock, advise): -redis addr[,addr...] (env
TOLLGATE_REDIS_ADDR), -cluster, -sentinel-master name, -user, -tls, -prefix,
-timeout. Every command takes -json. Flags take one dash or two.

Exit status: 0 ok, 1 failure, 2 usage, 3 empty (nothing stored under the
prefix).

Run 'tollgate <command> -h' for a command's flags and examples.
`)
}

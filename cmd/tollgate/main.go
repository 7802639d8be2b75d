// Command tollgate is tollgate's operator CLI.
//
//	tollgate status   [-redis addr] [-prefix p] [-json] [-classes names] [-pool name=a,b]   live budgets, leases, tickets, blocks, fairness flows and keys per scope; key pools' members
//	tollgate unblock  [-redis addr] [-credential] SCOPE  lift a scope's block (and its credential's)
//	tollgate advise   [-redis addr] [-prefix p] [-json]   learned output per scope and call kind against max_tokens
//	tollgate simulate [-provider openai] [-tpm n] ...    try limits on a workload before production
//
// Run a subcommand with -h for its flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is the CLI: it returns the exit status (0 ok, 1 failure, 2 usage).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	var err error
	switch args[0] {
	case "status":
		err = status(ctx, args[1:], stdout, stderr)
	case "unblock":
		err = unblock(ctx, args[1:], stdout, stderr)
	case "advise":
		err = advise(ctx, args[1:], stdout, stderr)
	case "simulate":
		err = simulate(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "tollgate: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0 // the flag set printed the help
	}
	if err == errUsage {
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: tollgate <command> [flags]

commands:
  status     live budgets, in-flight leases, booked tickets, blocks, fairness flows and keys of every scope in Redis
  unblock    lift a scope's block (and, with -credential, its credential's) in Redis
  advise     output learned per scope and call kind against max_tokens, and the TPM oversizing costs
  simulate   run a workload against limits on a simulated clock and report waits and utilization

Run 'tollgate <command> -h' for a command's flags.
`)
}

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// Exit statuses of run.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	exitEmpty   = 3
)

// errUsage is returned (maybe wrapped, with the reason) for a bad flag or
// argument: run exits 2.
var errUsage = errors.New("usage")

// emptyError reports that the store holds nothing for a command to show
// (no scopes, nothing learned): run prints the reason and exits 3. With
// -json the command has also written its result with the reason in its
// "empty" field.
type emptyError struct{ reason string }

func (e *emptyError) Error() string { return e.reason }

// source says where a command read, the "source" field of its -json
// output.
type source struct {
	// Redis is the -redis addresses, comma-separated; Mode "single",
	// "cluster" or "sentinel"; Master the Sentinel master's name.
	Redis  string `json:"redis"`
	Mode   string `json:"mode"`
	Master string `json:"sentinel_master,omitempty"`
	Prefix string `json:"prefix"`
}

// source returns the source of the flags.
func (f *redisFlags) source() source {
	var addr string
	for i, a := range f.addrs() {
		if i > 0 {
			addr += ","
		}
		addr += a
	}
	return source{Redis: addr, Mode: f.mode(), Master: f.sentinelMaster, Prefix: f.prefix}
}

// writeJSON writes v to w as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// newFlagSet returns the flag set of command name, writing to stderr, whose
// -h prints usage (the command's synopsis, description and examples, ending
// with a line "flags:"), its flags and, if conn, the connection help and
// exit statuses (connectionHelp).
func newFlagSet(name, usage string, stderr io.Writer, conn bool) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
		if conn {
			fmt.Fprint(fs.Output(), connectionHelp)
		}
	}
	return fs
}

// interval is a flag value of a period: a duration ("5s", "1m") or a
// number of seconds ("5").
type interval time.Duration

func (i *interval) String() string { return time.Duration(*i).String() }

func (i *interval) Set(s string) error {
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		*i = interval(n * float64(time.Second))
	} else if d, err := time.ParseDuration(s); err == nil {
		*i = interval(d)
	} else {
		return fmt.Errorf("want a duration (5s) or seconds (5)")
	}
	if *i < 0 {
		return fmt.Errorf("want >= 0")
	}
	return nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

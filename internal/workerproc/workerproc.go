// Package workerproc runs a program's worker processes: the program
// re-executed with a hidden flag and a JSON spec, each telling its parent
// when it is ready and exiting when its standard input closes. The samples
// use it to run several tollgate workers on one Redis store.
package workerproc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"
)

// Flag is the hidden flag that makes the program a worker process; its
// value is the spec as JSON.
const Flag = "-worker"

// ready is the line a worker process prints once it serves.
const ready = "ready"

// Arg returns the spec JSON of a worker process's arguments (Flag, value);
// ok is false for any other arguments.
func Arg(args []string) (spec string, ok bool) {
	if len(args) == 2 && args[0] == Flag {
		return args[1], true
	}
	return "", false
}

// Start re-executes the program n times as worker processes given spec
// (as JSON) and waits until each is Ready (a minute at most). The stop it
// returns closes their standard input, on which they exit, and waits for
// them (killing one after 10 s).
func Start(ctx context.Context, n int, spec any) (stop func(), err error) {
	arg, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var procs []*process
	stop = func() {
		for _, p := range procs {
			p.stop()
		}
	}
	for range n {
		p, err := start(ctx, exe, string(arg))
		if err != nil {
			stop()
			return nil, err
		}
		procs = append(procs, p)
	}
	return stop, nil
}

// Serve is a worker process's end of the protocol: it tells the parent the
// worker is ready and returns when the parent stops it (its standard input
// closes).
func Serve() {
	fmt.Println(ready)
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// process is one running worker process.
type process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// start runs exe as a worker process and waits until it is ready.
func start(ctx context.Context, exe, spec string) (*process, error) {
	cmd := exec.Command(exe, Flag, spec)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		s.Scan()
		line <- s.Text()
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-line:
		if l == ready {
			return p, nil
		}
		err = fmt.Errorf("worker process %d did not start", cmd.Process.Pid)
	case <-ctx.Done():
		err = ctx.Err()
	case <-time.After(time.Minute):
		err = fmt.Errorf("worker process %d did not start within a minute", cmd.Process.Pid)
	}
	p.stop()
	return nil, err
}

// stop closes the process's standard input and waits for it to exit,
// killing it after 10 s.
func (p *process) stop() {
	_ = p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

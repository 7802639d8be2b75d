package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// simCall is one call of a workload: when it arrives, what it asks for and
// what it produces, its class and fairness key.
type simCall struct {
	// At is the arrival, as an offset from the workload's start.
	At time.Duration
	// Input is the prompt's tokens; MaxTokens the max_tokens sent (0:
	// none); Output the tokens the call actually produces.
	Input, MaxTokens, Output int64
	// Class names the call's class ("": standard, or the first class
	// defined); Key is its fairness key ("": the class's shared key).
	Class, Key string
	// Latency is how long the provider takes to answer; 0: the
	// simulation's default.
	Latency time.Duration
	// Deadline, if positive, is how long after its arrival the call may
	// still be dispatched (its schedule-to-close timeout less the time the
	// call needs); a call that cannot fit before is refused.
	Deadline time.Duration
}

// workloadRecord is one call in a workload file. Field names follow the
// providers' usage fields.
type workloadRecord struct {
	// At is the arrival: seconds from the start (a number), a duration
	// from the start ("1m30s"), or a time (RFC 3339, as in recorded
	// traffic: the earliest is the start). Every record of a file uses
	// offsets or every record times.
	At           flexTime `json:"at"`
	InputTokens  int64    `json:"input_tokens"`
	MaxTokens    int64    `json:"max_tokens"`
	OutputTokens int64    `json:"output_tokens"`
	Class        string   `json:"class,omitempty"`
	FairnessKey  string   `json:"fairness_key,omitempty"`
	// Latency and Deadline are seconds (a number) or a duration string.
	Latency  flexDuration `json:"latency,omitempty"`
	Deadline flexDuration `json:"deadline,omitempty"`
}

// flexTime is an arrival: an offset, or a wall-clock time.
type flexTime struct {
	offset time.Duration
	wall   time.Time // set for an RFC 3339 time
	set    bool
}

func (t *flexTime) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil { // a number of seconds
		var n float64
		if err := json.Unmarshal(b, &n); err != nil {
			return errors.New("at: want seconds (a number), a duration (\"1.5s\") or an RFC 3339 time")
		}
		d, err := secondsDuration(n)
		if err != nil {
			return fmt.Errorf("at: %v", err)
		}
		*t = flexTime{offset: d, set: true}
		return nil
	}
	if w, err := time.Parse(time.RFC3339Nano, s); err == nil {
		*t = flexTime{wall: w, set: true}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("at: %q is neither a non-negative duration (\"1.5s\") nor an RFC 3339 time", s)
	}
	*t = flexTime{offset: d, set: true}
	return nil
}

// flexDuration is a duration given as seconds (a number) or a duration
// string ("2s").
type flexDuration time.Duration

func (d *flexDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil || v < 0 {
			return fmt.Errorf("%q is not a non-negative duration", s)
		}
		*d = flexDuration(v)
		return nil
	}
	var n float64
	if err := json.Unmarshal(b, &n); err != nil {
		return errors.New("want seconds (a number) or a duration (\"2s\")")
	}
	v, err := secondsDuration(n)
	*d = flexDuration(v)
	return err
}

func (d flexDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// secondsDuration converts n seconds to a duration, refusing negative and
// huge values.
func secondsDuration(n float64) (time.Duration, error) {
	if n < 0 || math.IsNaN(n) || n > float64(capacity.MaxBlock/time.Second)*12 {
		return 0, fmt.Errorf("%v seconds: want from 0 to a year", n)
	}
	return time.Duration(n * float64(time.Second)), nil
}

// maxWorkloadCalls bounds the calls of a workload file.
const maxWorkloadCalls = 2_000_000

// readWorkload reads a workload: a JSON array of records, or JSON lines
// (one record per line; blank lines are skipped). name names the input in
// errors. Unknown fields are refused (a typo would silently change the
// workload). Calls come back in the file's order, arrivals as offsets from
// the earliest time when the file gives times.
func readWorkload(r io.Reader, name string) ([]simCall, error) {
	br := bufio.NewReader(r)
	first, err := firstByte(br)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var recs []workloadRecord
	var where []string // where each record is, for errors
	if first == '[' {
		dec := json.NewDecoder(br)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&recs); err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		for i := range recs {
			where = append(where, fmt.Sprintf("%s: call %d", name, i+1))
		}
	} else {
		sc := bufio.NewScanner(br)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for line := 1; sc.Scan(); line++ {
			b := bytes.TrimSpace(sc.Bytes())
			if len(b) == 0 {
				continue
			}
			var rec workloadRecord
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&rec); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", name, line, err)
			}
			recs = append(recs, rec)
			where = append(where, name+":"+strconv.Itoa(line))
			if len(recs) > maxWorkloadCalls {
				break
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%s: no calls", name)
	}
	if len(recs) > maxWorkloadCalls {
		return nil, fmt.Errorf("%s: more than %d calls", name, maxWorkloadCalls)
	}
	return workloadCalls(recs, where)
}

// firstByte returns the first non-space byte of r without consuming it.
func firstByte(r *bufio.Reader) (byte, error) {
	for {
		b, err := r.ReadByte()
		if err == io.EOF {
			return 0, errors.New("no calls")
		}
		if err != nil {
			return 0, err
		}
		if !strings.ContainsRune(" \t\r\n", rune(b)) {
			return b, r.UnreadByte()
		}
	}
}

// workloadCalls validates records and turns them into calls.
func workloadCalls(recs []workloadRecord, where []string) ([]simCall, error) {
	var start time.Time
	walls := 0
	for i, r := range recs {
		if !r.At.set {
			return nil, fmt.Errorf("%s: no \"at\" (the arrival)", where[i])
		}
		if !r.At.wall.IsZero() {
			walls++
			if start.IsZero() || r.At.wall.Before(start) {
				start = r.At.wall
			}
		}
	}
	if walls != 0 && walls != len(recs) {
		return nil, fmt.Errorf("%s: \"at\" mixes times and offsets; use one or the other", where[0])
	}
	calls := make([]simCall, len(recs))
	for i, r := range recs {
		c := simCall{At: r.At.offset, Input: r.InputTokens, MaxTokens: r.MaxTokens, Output: r.OutputTokens,
			Class: r.Class, Key: r.FairnessKey, Latency: time.Duration(r.Latency), Deadline: time.Duration(r.Deadline)}
		if walls > 0 {
			c.At = r.At.wall.Sub(start)
		}
		if c.Input < 0 || c.MaxTokens < 0 || c.Output < 0 {
			return nil, fmt.Errorf("%s: negative tokens", where[i])
		}
		if c.Key != "" {
			if err := capacity.ValidateFairnessKey(c.Key); err != nil {
				return nil, fmt.Errorf("%s: fairness_key: %v", where[i], err)
			}
		}
		calls[i] = c
	}
	return calls, nil
}

// syntheticWorkload is n identical calls arriving rate per second (0: all
// at once).
func syntheticWorkload(n int, rate float64, input, maxTokens, output int64) []simCall {
	calls := make([]simCall, n)
	for i := range calls {
		calls[i] = simCall{Input: input, MaxTokens: maxTokens, Output: output}
		if rate > 0 {
			calls[i].At = time.Duration(float64(i) / rate * float64(time.Second))
		}
	}
	return calls
}

package testenv

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// EnvChromium names the Chromium (or Chrome) binary the tests open pages
// in; unset, they use chromium on PATH (Debian's package, which `make
// chromium` installs).
const EnvChromium = "TOLLGATE_CHROMIUM"

// headlessTimeout bounds one headless Chromium run.
const headlessTimeout = 2 * time.Minute

// Chromium returns the Chromium binary: $TOLLGATE_CHROMIUM, else chromium
// on PATH. Without one, tb fails when $CI is set (a green CI must not hide
// a missing install step) and is skipped otherwise.
func Chromium(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv(EnvChromium); p != "" {
		return p
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		msg := "chromium not found: install Debian's chromium (make chromium does) or set " + EnvChromium
		if os.Getenv("CI") != "" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	return p
}

// Headless opens the local file page in headless Chromium (Chromium) with
// the extra arguments args, such as --dump-dom (the DOM after the page's
// scripts ran, on standard output) or --screenshot=FILE, and returns what
// Chromium wrote on standard output. Each run has a profile of its own in
// a temporary folder; a failed or timed-out run fails tb.
func Headless(tb testing.TB, page string, args ...string) []byte {
	tb.Helper()
	bin := Chromium(tb)
	abs, err := filepath.Abs(page)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), headlessTimeout)
	defer cancel()
	argv := append([]string{"--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir=" + tb.TempDir()}, args...)
	u := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
	cmd := exec.CommandContext(ctx, bin, append(argv, u)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		tb.Fatalf("chromium %v: %v\n%s", args, err, stderr.Bytes())
	}
	return stdout.Bytes()
}

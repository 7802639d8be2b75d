package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestREADMEQuickStartIsThisProgram: the README's quick start is this
// program, line for line, so what users copy compiles (it does here); the
// package's Example runs it.
func TestREADMEQuickStartIsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	block := "```go\n" + string(src) + "```\n"
	require.True(t, strings.Contains(string(readme), block), "README.md must quote samples/quickstart/main.go whole, in a go block")
	require.Contains(t, string(readme), "go get github.com/tollgate-dev/tollgate")
}

package redisstore

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// envLuacheck, set, makes TestLuaLint fail where luacheck is missing
// instead of skipping (make lint sets it, after installing luacheck).
const envLuacheck = "TOLLGATE_LUACHECK"

// luacheckWarning is one line of luacheck's plain output with codes:
// "file:line:col: (W211) unused variable x".
var luacheckWarning = regexp.MustCompile(`^[^:]+:(\d+):(\d+): \(([EW])(\d+)\) (.*)$`)

// TestLuaLint runs luacheck on every script as Redis runs it (its files
// joined) and fails on any warning, naming the file and line it is in.
// A local of a shared file (constants.lua, state.lua, rules.lua) that one
// script leaves unused is dead only if every script that includes the file
// leaves it unused.
func TestLuaLint(t *testing.T) {
	bin, err := exec.LookPath("luacheck")
	if err != nil {
		if os.Getenv(envLuacheck) != "" {
			t.Fatalf("luacheck is not installed (make lint installs Debian's lua-check): %v", err)
		}
		t.Skip("luacheck is not installed; make lint installs it")
	}
	type place struct {
		file string
		line int
	}
	unusedIn := map[place][]string{} // a shared local, by the scripts leaving it unused
	messages := map[place]string{}
	includes := map[string]int{} // a file, by the number of scripts joining it
	var findings []string
	dir := t.TempDir()
	sources := scriptSources()
	sources["library"] = librarySources()          // as FUNCTION LOAD reads it, after its header
	sources["exchange"] = []string{"exchange.lua"} // the records engine's
	for name, files := range sources {
		var src strings.Builder
		var starts []int // the first line of each file in the joined source
		line := 1
		if name == "library" {
			lines := strings.SplitAfterN(current.library.source, "\n", 3) // newLibrary's two
			header := lines[0] + lines[1]
			src.WriteString(header)
			line += strings.Count(header, "\n")
		}
		for _, f := range files {
			includes[f]++
			b, err := luaFiles.ReadFile("lua/" + f)
			if err != nil {
				t.Fatal(err)
			}
			starts = append(starts, line)
			src.Write(b)
			src.WriteByte('\n')
			line += strings.Count(string(b), "\n") + 1
		}
		path := filepath.Join(dir, name+".lua")
		if err := os.WriteFile(path, []byte(src.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		out, _ := exec.Command(bin, "--formatter", "plain", "--codes", "--std", "lua51",
			"--globals", "redis", "cmsgpack", "KEYS", "ARGV", "--no-max-line-length", path).CombinedOutput()
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			m := luacheckWarning.FindStringSubmatch(l)
			if m == nil {
				if l != "" {
					findings = append(findings, name+": "+l)
				}
				continue
			}
			n, _ := strconv.Atoi(m[1])
			i := fileAt(starts, n)
			p := place{files[i], n - starts[i] + 1}
			msg := fmt.Sprintf("lua/%s:%d:%s: (%s%s) %s", p.file, p.line, m[2], m[3], m[4], m[5])
			switch shared := i < len(files)-1; {
			case shared && unusedCode(m[4]):
				unusedIn[p] = append(unusedIn[p], name)
				messages[p] = msg
			case shared:
				findings = append(findings, msg)
			default:
				findings = append(findings, msg+" (in "+name+")")
			}
		}
	}
	for p, scripts := range unusedIn {
		if len(scripts) == includes[p.file] {
			findings = append(findings, messages[p]+" (in every script)")
		}
	}
	slices.Sort(findings)
	findings = slices.Compact(findings)
	for _, f := range findings {
		t.Error(f)
	}
}

// unusedCode reports whether a luacheck warning code says a local is
// unused: never read (211, 231) or a value never read (311).
func unusedCode(code string) bool {
	return code == "211" || code == "231" || code == "311"
}

// fileAt returns the index of the file that joined line n is in, given the
// first line of each file.
func fileAt(starts []int, n int) int {
	i := len(starts) - 1
	for i > 0 && starts[i] > n {
		i--
	}
	return i
}

// Package docsref_test checks that the repository's documentation names
// only what exists: every relative link and every file a Markdown file or a
// Go comment names in backticks or as a path, and every `pkg.Name`
// identifier of this module's packages that a Markdown file names.
package docsref_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the module's root directory, two levels above this package.
const root = "../.."

// repo lists the module's files (build outputs, local servers and testdata
// left out): by path from the root, and by base name.
type repo struct {
	paths map[string]bool
	bases map[string]bool
}

func readRepo(t *testing.T) repo {
	t.Helper()
	r := repo{paths: map[string]bool{}, bases: map[string]bool{}}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin") {
				return filepath.SkipDir
			}
			r.paths[rel] = true
			return nil
		}
		r.paths[rel] = true
		r.bases[d.Name()] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// has reports whether name, a path as a document wrote it, names a file or
// directory of the module: from the root, from the document's directory,
// or (a path with a directory, such as lua/rules.lua) as the tail of one.
func (r repo) has(name, docDir string) bool {
	name = strings.TrimSuffix(strings.TrimPrefix(name, "./"), "/")
	if r.paths[name] || r.paths[filepath.ToSlash(filepath.Join(docDir, name))] {
		return true
	}
	if !strings.Contains(name, "/") {
		return r.bases[name]
	}
	for p := range r.paths {
		if strings.HasSuffix(p, "/"+name) {
			return true
		}
	}
	return false
}

var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fileName = regexp.MustCompile("`([A-Za-z0-9_./-]+\\.(?:go|lua|md|json|yml|yaml|sh|txt))`")
	goFile   = regexp.MustCompile(`(?:^|[\s(])((?:[a-z0-9_]+/)*[a-z0-9_]+\.(?:go|lua))\b`)
	ident    = regexp.MustCompile("`((?:capacity|redisstore|interceptor|activities|workflows|testsuite|errors|openaierr|anthropicerr|geminierr)\\.[A-Z][A-Za-z0-9_]*(?:\\.[A-Z][A-Za-z0-9_]*)?)")
)

// markdown returns the module's Markdown files, by path from the root.
func (r repo) markdown() []string {
	var out []string
	for p := range r.paths {
		if strings.HasSuffix(p, ".md") && !strings.Contains(p, "testdata/") {
			out = append(out, p)
		}
	}
	return out
}

// TestDocsNameWhatExists: every relative link and every file named in
// backticks in a Markdown file exists.
func TestDocsNameWhatExists(t *testing.T) {
	r := readRepo(t)
	for _, doc := range r.markdown() {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Dir(doc)
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if !r.paths[filepath.ToSlash(filepath.Join(dir, target))] {
				t.Errorf("%s links to %s, which does not exist", doc, m[1])
			}
		}
		for _, m := range fileName.FindAllStringSubmatch(string(b), -1) {
			if !r.has(m[1], dir) {
				t.Errorf("%s names `%s`, which does not exist", doc, m[1])
			}
		}
	}
}

// TestCommentsNameWhatExists: every .go or .lua file a Go comment names
// exists.
func TestCommentsNameWhatExists(t *testing.T) {
	r := readRepo(t)
	for p := range r.paths {
		if !strings.HasSuffix(p, ".go") || strings.Contains(p, "testdata/") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, p), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, cg := range f.Comments {
			for _, m := range goFile.FindAllStringSubmatch(cg.Text(), -1) {
				if !r.has(m[1], filepath.Dir(p)) {
					t.Errorf("a comment in %s names %s, which does not exist", p, m[1])
				}
			}
		}
	}
}

// elsewhere are identifiers the docs name from packages outside the module
// whose names this module's packages share.
var elsewhere = map[string]bool{
	"errors.As": true, "errors.Is": true, "errors.New": true, "errors.Join": true, "errors.Unwrap": true, // the standard library's
	"interceptor.Header": true, // go.temporal.io/sdk/interceptor
}

// TestDocsNameDeclaredIdentifiers: every `pkg.Name` (or `pkg.Type.Member`)
// a Markdown file names is declared in that package of the module.
func TestDocsNameDeclaredIdentifiers(t *testing.T) {
	r := readRepo(t)
	decls := map[string]map[string]bool{} // package name -> declared names
	for p := range r.paths {
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.Contains(p, "testdata/") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, p), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		names := decls[f.Name.Name]
		if names == nil {
			names = map[string]bool{}
			decls[f.Name.Name] = names
		}
		declared(f, names)
	}
	for _, doc := range r.markdown() {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ident.FindAllStringSubmatch(string(b), -1) {
			pkg, name, _ := strings.Cut(m[1], ".")
			if !decls[pkg][name] && !elsewhere[m[1]] {
				t.Errorf("%s names `%s`, which package %s does not declare", doc, m[1], pkg)
			}
		}
	}
}

// declared adds the top-level names of f to names, with Type.Method for
// methods and Type.Field for struct fields.
func declared(f *ast.File, names map[string]bool) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				names[d.Name.Name] = true
				continue
			}
			if typ := receiverType(d.Recv.List[0].Type); typ != "" {
				names[typ+"."+d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					names[s.Name.Name] = true
					if st, ok := s.Type.(*ast.StructType); ok {
						for _, fl := range st.Fields.List {
							for _, n := range fl.Names {
								names[s.Name.Name+"."+n.Name] = true
							}
							if len(fl.Names) == 0 { // embedded
								if typ := receiverType(fl.Type); typ != "" {
									names[s.Name.Name+"."+typ] = true
								}
							}
						}
					}
					if it, ok := s.Type.(*ast.InterfaceType); ok {
						for _, m := range it.Methods.List {
							for _, n := range m.Names {
								names[s.Name.Name+"."+n.Name] = true
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names[n.Name] = true
					}
				}
			}
		}
	}
}

// receiverType returns the name of a receiver's or embedded field's type.
func receiverType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverType(e.X)
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.IndexListExpr:
		return receiverType(e.X)
	}
	return ""
}

// maxParagraph is the most words a paragraph or list item of the README
// may hold: longer explanations belong in docs/.
const maxParagraph = 120

var (
	codeBlock = regexp.MustCompile("(?s)```.*?```")
	blankLine = regexp.MustCompile(`\n\s*\n`)
	listItem  = regexp.MustCompile(`\n(?:\s*[-*] |\s*\d+\. )`)
)

// TestREADMEParagraphsAreShort: no paragraph or list item of the README,
// code and tables aside, runs over maxParagraph words.
func TestREADMEParagraphsAreShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range blankLine.Split(codeBlock.ReplaceAllString(string(b), ""), -1) {
		if strings.HasPrefix(strings.TrimSpace(block), "|") {
			continue
		}
		for _, p := range listItem.Split(block, -1) {
			if n := len(strings.Fields(p)); n > maxParagraph {
				t.Errorf("README.md has a paragraph of %d words (at most %d): %.80q", n, maxParagraph, p)
			}
		}
	}
}

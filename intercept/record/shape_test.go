package record

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxRecorderMethods bounds the Recorder: it keeps the record and nothing
// else (doc.go). It grew back past this bound once, a method at a time,
// each one small and reasonable; a new job belongs in a type of its own.
const maxRecorderMethods = 30

// TestRecorderShape holds the Recorder to its bound, with every method in
// record.go, its type's file.
func TestRecorderShape(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var methods []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}
			star, ok := fn.Recv.List[0].Type.(*ast.StarExpr)
			if !ok {
				continue
			}
			if id, ok := star.X.(*ast.Ident); !ok || id.Name != "Recorder" {
				continue
			}
			methods = append(methods, fn.Name.Name)
			if name != "record.go" {
				t.Errorf("(*Recorder).%s is in %s, not record.go", fn.Name.Name, name)
			}
		}
	}
	if len(methods) > maxRecorderMethods {
		t.Errorf("the Recorder has %d methods, more than %d: %s", len(methods), maxRecorderMethods, strings.Join(methods, ", "))
	}
}

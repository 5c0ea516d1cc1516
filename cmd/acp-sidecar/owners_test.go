package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// recorderMethods is as many methods as the record may have: it keeps the
// record (its stage, its goroutine, the store, Snapshot and Settle) and
// nothing else, or it grows back into the one object that did every job.
const recorderMethods = 30

// TestRecorderStaysSmall holds the record to its one job, as far as its
// methods show it: it stays within recorderMethods. A type's methods may
// span its package's files, which group code by concern (DESIGN.md "The
// house"): the rule that put every method in its type's file merged
// files and turned methods into free functions, and is withdrawn.
func TestRecorderStaysSmall(t *testing.T) {
	root := filepath.Join(moduleRoot(t), "intercept")
	fset := token.NewFileSet()
	declared := map[string]string{} // package dir + "." + type -> file
	type method struct{ file, dir, recv, name string }
	var methods []method
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok {
						declared[dir+"."+ts.Name.Name] = path
					}
				}
			case *ast.FuncDecl:
				if decl.Recv != nil {
					methods = append(methods, method{path, dir, receiverType(decl.Recv.List[0].Type), decl.Name.Name})
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	recorder := 0
	for _, m := range methods {
		if _, ok := declared[m.dir+"."+m.recv]; !ok {
			t.Errorf("%s: method %s.%s of a type its package does not declare", m.file, m.recv, m.name)
		}
		if m.recv == "Recorder" && filepath.Base(m.dir) == "record" {
			recorder++
		}
	}
	if len(methods) == 0 {
		t.Fatalf("no methods found under %s", root)
	}
	if recorder == 0 || recorder > recorderMethods {
		t.Errorf("record.Recorder has %d methods; it keeps only the record, in at most %d", recorder, recorderMethods)
	}
}

// receiverType is the name of a method receiver's type: T of T, *T, T[P]
// and *T[P].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

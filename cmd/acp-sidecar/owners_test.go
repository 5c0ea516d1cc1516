package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxMethods is as many methods as a type may have. An owner a newcomer can
// hold in their head does one job; a type past this has taken a second one
// and is split by concern inside its package. A type's methods may span
// its package's files, which group code by concern (DESIGN.md "The
// house"): the rule that put every method in its type's file merged files
// and turned methods into free functions, and is withdrawn.
const maxMethods = 30

// TestOwnersStaySmall holds every type in the module, test code included,
// to maxMethods declared methods, and holds the shapes that hide an
// owner's work: ctx anywhere but first, and an exported function that
// takes its own package's struct pointer first where a method would do.
func TestOwnersStaySmall(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	structs := map[string]bool{} // package dir + "." + struct type
	declared := map[string]string{}
	type method struct{ file, dir, recv, name string }
	var methods []method
	var funcs []struct {
		dir string
		fd  *ast.FuncDecl
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || (strings.HasPrefix(n, ".") && path != root) || n == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		if strings.HasSuffix(path, "_test.go") && strings.HasSuffix(f.Name.Name, "_test") {
			dir += "#external" // an external test package is a package of its own
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok {
						declared[dir+"."+ts.Name.Name] = path
						if _, ok := ts.Type.(*ast.StructType); ok {
							structs[dir+"."+ts.Name.Name] = true
						}
					}
				}
			case *ast.FuncDecl:
				if decl.Recv != nil {
					methods = append(methods, method{path, dir, receiverType(decl.Recv.List[0].Type), decl.Name.Name})
				}
				funcs = append(funcs, struct {
					dir string
					fd  *ast.FuncDecl
				}{dir, decl})
				checkCtxFirst(t, fset, decl.Type, decl.Name.Name)
				if decl.Body != nil {
					ast.Inspect(decl.Body, func(n ast.Node) bool {
						if lit, ok := n.(*ast.FuncLit); ok {
							checkCtxFirst(t, fset, lit.Type, "a func literal in "+decl.Name.Name)
						}
						return true
					})
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(methods) == 0 {
		t.Fatalf("no methods found under %s", root)
	}
	counts := map[string]int{}
	for _, m := range methods {
		if _, ok := declared[m.dir+"."+m.recv]; !ok {
			t.Errorf("%s: method %s.%s of a type its package does not declare", m.file, m.recv, m.name)
		}
		counts[m.dir+"."+m.recv]++
	}
	var big []string
	for k, n := range counts {
		if n > maxMethods {
			rel, _ := filepath.Rel(root, k)
			big = append(big, fmt.Sprintf("%s has %d methods", rel, n))
		}
	}
	sort.Strings(big)
	for _, b := range big {
		t.Errorf("%s; an owner keeps one job, in at most %d", b, maxMethods)
	}
	for _, f := range funcs {
		fd := f.fd
		if fd.Recv != nil || !fd.Name.IsExported() || fd.Type.Params == nil || len(fd.Type.Params.List) == 0 {
			continue
		}
		star, ok := fd.Type.Params.List[0].Type.(*ast.StarExpr)
		if !ok {
			continue
		}
		if id, ok := star.X.(*ast.Ident); ok && structs[f.dir+"."+id.Name] {
			t.Errorf("%s: %s takes *%s first: make it a method of %s", fset.Position(fd.Pos()), fd.Name.Name, id.Name, id.Name)
		}
	}
}

// checkCtxFirst fails a function whose context.Context is not its first
// parameter.
func checkCtxFirst(t *testing.T, fset *token.FileSet, ft *ast.FuncType, name string) {
	t.Helper()
	if ft.Params == nil {
		return
	}
	i := 0
	for _, field := range ft.Params.List {
		n := len(field.Names)
		if n == 0 {
			n = 1
		}
		if sel, ok := field.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Context" {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "context" && i != 0 {
				t.Errorf("%s: %s takes ctx as parameter %d; ctx comes first", fset.Position(field.Pos()), name, i+1)
			}
		}
		i += n
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

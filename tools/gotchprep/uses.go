package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// usesPkg is the package of the host module that calls gotch (the only one
// that imports it), relative to the repository root.
const usesPkg = "host/tensor"

// opUse is one generated C wrapper (an atg_* function, named as
// STUBBED_OPS.txt names it) that the scanned package reaches.
type opUse struct {
	Op  string // atg_totype
	Via string // the gotch function the package calls: ts.(*Tensor).Totype
	At  string // where it calls it: host/tensor/tensor.go:312
}

// usedOps returns, by C name, the generated wrappers that the non-test Go
// files of the package in pkgDir reach through the prepared gotch copy in
// gotchDir: every gotch function or method the package refers to (a call, or
// a method value), followed through gotch's own Go code (Must* wrappers,
// hand-written helpers) down to the libtch functions and the C.atg_*
// functions they call. Both are type-checked with go/types, so a method of
// the host's own types that shares a name with a gotch method (Scope.Add,
// Tensor.Add) is not taken for it. rel names pkgDir in the use sites.
func usedOps(gotchDir, pkgDir, rel string) (map[string]opUse, error) {
	l := &loader{
		fset:     token.NewFileSet(),
		gotchDir: gotchDir,
		pkgs:     map[string]*types.Package{},
		calls:    map[*types.Func][]*types.Func{},
		cNames:   map[*types.Func][]string{},
	}
	l.info = &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	files, err := l.parseDir(pkgDir)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no Go files", pkgDir)
	}
	conf := l.config()
	if _, err := conf.Check(rel, l.fset, files, l.info); err != nil && l.fatal != nil {
		return nil, l.fatal
	}
	if l.fatal != nil {
		return nil, l.fatal
	}
	// The roots: gotch functions the package refers to, with their first use.
	type root struct {
		fn *types.Func
		at token.Position
	}
	var roots []root
	seen := map[*types.Func]bool{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			fn, ok := l.info.Uses[id].(*types.Func)
			if !ok || !l.isGotch(fn.Pkg()) {
				return true
			}
			if fn = fn.Origin(); seen[fn] {
				return true
			}
			seen[fn] = true
			roots = append(roots, root{fn, l.fset.Position(id.Pos())})
			return true
		})
	}
	sort.SliceStable(roots, func(i, j int) bool {
		a, b := roots[i].at, roots[j].at
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Offset < b.Offset
	})
	used := map[string]opUse{}
	for _, r := range roots {
		at := fmt.Sprintf("%s/%s:%d", rel, filepath.Base(r.at.Filename), r.at.Line)
		via := funcName(r.fn)
		// Depth-first through gotch's own functions.
		visited := map[*types.Func]bool{}
		stack := []*types.Func{r.fn}
		for len(stack) > 0 {
			fn := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if visited[fn] {
				continue
			}
			visited[fn] = true
			for _, c := range l.cNames[fn] {
				if _, ok := used[c]; !ok {
					used[c] = opUse{Op: c, Via: via, At: at}
				}
			}
			stack = append(stack, l.calls[fn]...)
		}
	}
	if len(used) == 0 {
		return nil, fmt.Errorf("%s reaches no generated gotch op through %s: the scan is broken (is -uses the repository root?)", rel, gotchDir)
	}
	return used, nil
}

// funcName renders a gotch function as ts.Cat or ts.(*Tensor).Totype.
func funcName(fn *types.Func) string {
	sig, _ := fn.Type().(*types.Signature)
	if sig == nil || sig.Recv() == nil {
		return fn.Pkg().Name() + "." + fn.Name()
	}
	t := sig.Recv().Type()
	star := ""
	if p, ok := t.(*types.Pointer); ok {
		star, t = "*", p.Elem()
	}
	name := t.String()
	if n, ok := t.(*types.Named); ok {
		name = n.Obj().Name()
	}
	return fmt.Sprintf("%s.(%s%s).%s", fn.Pkg().Name(), star, name, fn.Name())
}

// loader type-checks the scanned package and the gotch packages it imports
// from source. Packages outside gotch (the standard library) are empty
// stand-ins: type errors are ignored, and nothing that decides which gotch
// function is called depends on them.
type loader struct {
	fset     *token.FileSet
	gotchDir string
	info     *types.Info
	pkgs     map[string]*types.Package
	calls    map[*types.Func][]*types.Func // gotch function → gotch functions its body refers to
	cNames   map[*types.Func][]string      // libtch function → C.atg_* it calls
	fatal    error
}

func (l *loader) config() *types.Config {
	return &types.Config{
		Importer:    l,
		FakeImportC: true,
		Error:       func(error) {}, // stand-in packages make errors; they do not matter
	}
}

func (l *loader) isGotch(p *types.Package) bool {
	return p != nil && (p.Path() == gotchModule || strings.HasPrefix(p.Path(), gotchModule+"/"))
}

// Import implements types.Importer.
func (l *loader) Import(p string) (*types.Package, error) {
	if p == "unsafe" {
		return types.Unsafe, nil
	}
	if pkg, ok := l.pkgs[p]; ok {
		return pkg, nil
	}
	if p != gotchModule && !strings.HasPrefix(p, gotchModule+"/") {
		name := path.Base(p)
		if strings.HasPrefix(name, "v") && strings.Trim(name[1:], "0123456789") == "" && path.Dir(p) != "." {
			name = path.Base(path.Dir(p))
		}
		pkg := types.NewPackage(p, name)
		pkg.MarkComplete()
		l.pkgs[p] = pkg
		return pkg, nil
	}
	dir := filepath.Join(l.gotchDir, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(p, gotchModule), "/")))
	files, err := l.parseDir(dir)
	if err != nil {
		l.fatal = err
		return nil, err
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}
	conf := l.config()
	pkg, _ := conf.Check(p, l.fset, files, info)
	if pkg == nil {
		l.fatal = fmt.Errorf("type-checking %s failed", dir)
		return nil, l.fatal
	}
	l.pkgs[p] = pkg
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			fn, ok := info.Defs[fd.Name].(*types.Func)
			if !ok {
				continue
			}
			fn = fn.Origin()
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok && x.Name == "C" && strings.HasPrefix(n.Sel.Name, "atg_") {
						if _, isPkg := info.Uses[x].(*types.PkgName); isPkg || info.Uses[x] == nil {
							l.cNames[fn] = append(l.cNames[fn], n.Sel.Name)
						}
					}
				case *ast.Ident:
					if callee, ok := info.Uses[n].(*types.Func); ok && l.isGotch(callee.Pkg()) {
						l.calls[fn] = append(l.calls[fn], callee.Origin())
					}
				}
				return true
			})
		}
	}
	return pkg, nil
}

// parseDir parses the non-test Go files of a directory that build for this
// platform (cgo files included).
func (l *loader) parseDir(dir string) ([]*ast.File, error) {
	ctx := build.Default
	ctx.CgoEnabled = true
	bp, err := ctx.ImportDir(dir, 0)
	if err != nil {
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			return nil, fmt.Errorf("%s: no Go files", dir)
		}
		return nil, err
	}
	var files []*ast.File
	for _, name := range append(append([]string{}, bp.GoFiles...), bp.CgoFiles...) {
		f, err := parser.ParseFile(l.fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// sourceHash identifies the non-test Go sources of a package, for the stamp:
// the scan is repeated only when they changed.
func sourceHash(dir string) (string, error) {
	ctx := build.Default
	ctx.CgoEnabled = true
	bp, err := ctx.ImportDir(dir, 0)
	if err != nil {
		return "", err
	}
	names := append(append([]string{}, bp.GoFiles...), bp.CgoFiles...)
	sort.Strings(names)
	h := sha256.New()
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// checkStubbed fails when a generated op that the package uses is stubbed,
// naming each such op, the gotch function the host calls for it, where, and
// the libtorch version.
func checkStubbed(used map[string]opUse, stubbed []string, version string) error {
	var bad []opUse
	for _, s := range stubbed {
		if u, ok := used[s]; ok {
			bad = append(bad, u)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Slice(bad, func(i, j int) bool { return bad[i].Op < bad[j].Op })
	var b strings.Builder
	fmt.Fprintf(&b, "libtorch %s lacks %d op(s) that optlab uses (%s calls them; gotch's generated wrapper does not compile against this libtorch and was stubbed):", version, len(bad), usesPkg)
	for _, u := range bad {
		fmt.Fprintf(&b, "\n  %s  (%s, at %s)", u.Op, u.Via, u.At)
	}
	b.WriteString("\nuse a libtorch these ops exist in (set LIBTORCH), or change optlab to do without them")
	return errors.New(b.String())
}

package builtin_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/plugins/compose"
	"github.com/optlab/optlab/sdk/optim"
)

// Every built-in method is listed once, constructs, says the name it is
// listed under and has a one-line doc.
func TestRegistry(t *testing.T) {
	r := builtin.Registry()
	names := r.Names()
	want := []string{"sgd", "sam", "looksam", "aesam", "fsam", "wsam", "gsam", "bsam", "otmdr", "sgvb", "otmdr-sgvb", "ensembles", "swa", "adamw", "muon", "shampoo", "soap", "dst", "edst", "esam", "msam"}
	if !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	seen := map[string]bool{}
	for _, e := range r.Entries() {
		if seen[e.Name] {
			t.Errorf("%q listed twice", e.Name)
		}
		seen[e.Name] = true
		if e.Doc == "" || strings.Contains(e.Doc, "\n") {
			t.Errorf("%s: doc %q, want one line", e.Name, e.Doc)
		}
		opt, err := r.New(e.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got := opt.Info().Name; got != e.Name {
			t.Errorf("%s: Info().Name = %q", e.Name, got)
		}
		if got := builtin.Constructor(e.Name)().Info().Name; got != e.Name {
			t.Errorf("Constructor(%q) makes %q", e.Name, got)
		}
	}
	if _, err := r.New("adam"); err == nil {
		t.Error("unknown method constructed")
	}
	// A fresh registry each time: adding to one leaves the next alone.
	if err := r.Add(optim.Entry{Name: "extra", New: builtin.Constructor("sgd")}); err != nil {
		t.Fatal(err)
	}
	if _, ok := builtin.Registry().Lookup("extra"); ok {
		t.Error("registries share their entries")
	}
}

// The wrapping methods' (ensembles', swa's) members are the built-in
// methods they may use, in list order, neither wrapper among them; those
// that declare optim.Features.BaseStep (follow SetLR) are the ones
// snapshot, FGE and swa_lr can schedule.
// The ensembles method's options are the same.
func TestMemberOptions(t *testing.T) {
	for name, o := range map[string]compose.Options{"MemberOptions": builtin.MemberOptions(), "EnsembleOptions": builtin.EnsembleOptions()} {
		if got, want := o.Members.Names(), []string{"sgd", "sam", "bsam", "otmdr"}; !slices.Equal(got, want) {
			t.Errorf("%s: members %q, want %q", name, got, want)
		}
		if got, want := o.Scheduled(), []string{"sgd", "sam", "otmdr"}; !slices.Equal(got, want) {
			t.Errorf("%s: members following SetLR %q, want %q", name, got, want)
		}
	}
}

// Every plugin binary is named after a built-in method and serves it from
// the list: its main is serve.Serve(builtin.Constructor("<its name>")).
func TestCommands(t *testing.T) {
	dirs, err := filepath.Glob("../*/cmd/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no plugin commands under plugins/*/cmd")
	}
	r := builtin.Registry()
	served := map[string]bool{}
	for _, d := range dirs {
		name := filepath.Base(d)
		if _, ok := r.Lookup(name); !ok {
			t.Errorf("%s: no built-in method %q", d, name)
			continue
		}
		src, err := os.ReadFile(filepath.Join(d, "main.go"))
		if err != nil {
			t.Fatal(err)
		}
		if call := "serve.Serve(builtin.Constructor(" + strconv.Quote(name) + "))"; !strings.Contains(string(src), call) {
			t.Errorf("%s/main.go does not call %s", d, call)
		}
		served[name] = true
	}
	for _, n := range r.Names() {
		if !served[n] {
			t.Errorf("method %q has no plugin binary under plugins/*/cmd", n)
		}
	}
}

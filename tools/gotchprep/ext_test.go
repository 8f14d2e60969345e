package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExtMode: the prepared copy has the optlab_extlibtch build mode: the
// C++ wrapper and the libtorch-linking Go files are left out under the tag,
// lib_ext.go links -ltch with the run path $ORIGIN/../lib, SYMBOLS.txt
// lists the C functions libtch exports (and only those), the stand-in
// libtch.so is built, and USED_OPS.txt is the manifest of used ops.
func TestExtMode(t *testing.T) {
	gotchSource(t)
	out := filepath.Join(t.TempDir(), "gotch")
	calls := 0
	if err := prepareForTest(t, out, copyHostTensor(t), nil, &calls); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(out, "libtch")
	for _, f := range []string{"torch_api.cpp", "lib.go", "optlab_libtorch.go"} {
		b, err := os.ReadFile(filepath.Join(lib, f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), notExt) {
			t.Errorf("%s does not begin with %q", f, notExt)
		}
	}
	ext, err := os.ReadFile(filepath.Join(lib, "lib_ext.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"//go:build optlab_extlibtch\n", "-L${SRCDIR}/extlib -ltch -Wl,-rpath,$ORIGIN/../lib"} {
		if !strings.Contains(string(ext), want) {
			t.Errorf("lib_ext.go lacks %q:\n%s", want, ext)
		}
	}
	syms := readLines(filepath.Join(lib, "SYMBOLS.txt"))
	has := map[string]bool{}
	for _, s := range syms {
		has[s] = true
	}
	for _, want := range []string{"atg_totype", "at_manual_seed", "get_and_reset_last_err", "at_grad_set_enabled", "atc_set_device",
		"ati_free", "optlab_fill_fresh", "optlab_guard_writes", "optlab_module_get", "optlab_libtorch_version", "optlab_libtorch_cuda"} {
		if !has[want] {
			t.Errorf("SYMBOLS.txt lacks %s", want)
		}
	}
	for _, not := range []string{"of_carray_tensor", "device_of_int", "optlab_submodule", "optlab_guard_delete", "PROTECT", "set_lr"} {
		if has[not] {
			t.Errorf("SYMBOLS.txt has %s, which is no C function of libtch", not)
		}
	}
	if st, err := os.Stat(filepath.Join(lib, "extlib", "libtch.so")); err != nil || st.Size() == 0 {
		t.Errorf("no stand-in libtch.so: %v", err)
	}
	used := readLines(filepath.Join(lib, "USED_OPS.txt"))
	found := false
	for _, l := range used {
		if strings.HasPrefix(l, "atg_totype\t") {
			found = true
		}
	}
	if !found || len(used) < 50 {
		t.Errorf("USED_OPS.txt (%d lines) lacks atg_totype", len(used))
	}
}

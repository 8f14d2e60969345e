package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPluginsStartAtOnce: host check and host run start the plugins of a
// grid's methods at once for their Info. Four methods whose plugin never
// answers the handshake (a script that sleeps) and one whose plugin path
// does not exist fail after about one start deadline (--timeouts start=2s),
// not one deadline per hanging plugin (8 s), with each method's error, in
// the methods' order.
func TestPluginsStartAtOnce(t *testing.T) {
	const hanging, deadline = 4, 2 * time.Second
	dir := t.TempDir()
	// exec: the process that go-plugin kills at the deadline is sleep
	// itself, and none is left behind.
	if err := os.WriteFile(filepath.Join(dir, "hang"), []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("name = \"hangs\"\n[model]\narchs = [\"mlp\"]\n[train]\nepochs = 1\nthreads = 1\ndevice = \"cpu\"\n")
	names := []string{"H1", "H2", "Missing", "H3", "H4"} // H*: hanging
	for _, name := range names {
		path := "hang"
		if name == "Missing" {
			path = "missing"
		}
		fmt.Fprintf(&b, "[[method]]\nname = %q\npath = %q\n", name, path)
	}
	exp := filepath.Join(dir, "hangs.toml")
	if err := os.WriteFile(exp, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"check", "run"} {
		t.Run(cmd, func(t *testing.T) {
			args := []string{cmd, "--plugins", pluginDir, "--timeouts", "start=" + deadline.String()}
			if cmd == "run" {
				args = append(args, "-q", "--results", filepath.Join(dir, "results"))
			}
			start := time.Now()
			r := host(t, append(args, exp)...)
			elapsed := time.Since(start)
			wantError(t, r, "timeout while waiting for plugin to start", filepath.Join(dir, "missing")+" does not exist")
			// Sequential starts would take hanging × deadline; at once,
			// one deadline and the start-up around it.
			if limit := time.Duration(hanging-1)*deadline - time.Second; elapsed >= limit {
				t.Errorf("%s took %v with %d plugins that do not start within %v: want less than %v (they start at once)", cmd, elapsed, hanging, deadline, limit)
			}
			at := -1
			for _, n := range names {
				i := strings.Index(r.stderr, fmt.Sprintf("method %q: ", n))
				if i < 0 {
					t.Errorf("no error for method %s:\n%s", n, r.stderr)
					continue
				}
				if i < at {
					t.Errorf("the error of method %s comes before the previous method's:\n%s", n, r.stderr)
				}
				at = i
			}
			if _, err := os.Stat(filepath.Join(dir, "results")); err == nil {
				t.Error("host run wrote results for a grid whose plugins do not start")
			}
		})
	}
}

// TestBrokenPluginStartedOnce: methods that name the same plugin share
// one launch for its Info, so a plugin that never answers its handshake
// is started once and costs one start deadline, not one per method or per
// turn of parallel launches (#41, also seen: a broken plugin path cost
// one start deadline per method in host check, in turn); every method
// still gets its error.
func TestBrokenPluginStartedOnce(t *testing.T) {
	const methods, deadline = 12, 2 * time.Second
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	script := fmt.Sprintf("#!/bin/sh\necho started >> %q\nexec sleep 60\n", starts)
	if err := os.WriteFile(filepath.Join(dir, "hang"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("name = \"hangs\"\n[model]\narchs = [\"mlp\"]\n[train]\nepochs = 1\nthreads = 1\ndevice = \"cpu\"\n")
	for i := range methods {
		fmt.Fprintf(&b, "[[method]]\nname = \"M%d\"\npath = \"hang\"\n", i)
	}
	exp := filepath.Join(dir, "hangs.toml")
	if err := os.WriteFile(exp, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := host(t, "check", "--plugins", pluginDir, "--timeouts", "start="+deadline.String(), exp)
	elapsed := time.Since(start)
	wantError(t, r, "timeout while waiting for plugin to start")
	for i := range methods {
		if !strings.Contains(r.stderr, fmt.Sprintf("method \"M%d\": ", i)) {
			t.Errorf("no error for method M%d:\n%s", i, r.stderr)
		}
	}
	got, err := os.ReadFile(starts)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(got), "started"); n != 1 {
		t.Errorf("the plugin was started %d times for %d methods, want once", n, methods)
	}
	if limit := 2*deadline - time.Second/2; elapsed >= limit {
		t.Errorf("host check took %v, want under %v (one start deadline)", elapsed, limit)
	}
}

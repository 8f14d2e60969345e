package plugin

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// binDir holds the test plugin binaries built by TestMain: toy, plain and
// future (one binary, variants by file name), and notplugin (a script).
var binDir string

// helperEnv makes the test binary act as a host that launches the plugin
// named by the variable's value, prints its PID and waits to be killed.
const helperEnv = "OPTLAB_PLUGIN_TEST_HELPER_HOST"

func TestMain(m *testing.M) {
	if path := os.Getenv(helperEnv); path != "" {
		helperHost(path)
		return
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "optlab-plugins")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	toy := filepath.Join(dir, "toy")
	build := exec.Command("go", "build", "-o", toy, "github.com/optlab/optlab/internal/testplugin/toyplugin")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build test plugin:", err)
		return 1
	}
	for _, name := range []string{"plain", "future"} {
		if err := os.Link(toy, filepath.Join(dir, name)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	script := "#!/bin/sh\necho 'notplugin: something went wrong' >&2\nsleep 0.2\necho 'not a plugin handshake'\nexit 3\n"
	if err := os.WriteFile(filepath.Join(dir, "notplugin"), []byte(script), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// A non-executable file is not a plugin and is not listed.
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("docs"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir = dir
	defer CleanupAll()
	return m.Run()
}

// helperHost launches the plugin at path, prints its PID on stdout and
// waits (to be SIGKILLed by TestPluginExitsWhenHostDies).
func helperHost(path string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Launch(ctx, LaunchSpec{Path: path})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper host:", err)
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(w, c.Pid())
	w.Flush()
	time.Sleep(time.Minute)
	os.Exit(2)
}

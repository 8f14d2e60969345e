package plugin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBarePathIsNotLookedUpInPATH: an experiment's path = "./myopt" becomes
// the bare "myopt" once joined and cleaned; os/exec would look that up in
// $PATH and run a same-named program there. The launcher runs ./myopt.
func TestBarePathIsNotLookedUpInPATH(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "myopt"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for p, want := range map[string]string{
		"myopt":                     "./myopt",
		"./myopt":                   "./myopt",
		filepath.Join(dir, "myopt"): filepath.Join(dir, "myopt"),
	} {
		path, _, err := LaunchSpec{Path: filepath.Clean(p)}.resolve()
		if err != nil {
			t.Fatal(err)
		}
		if path != want {
			t.Errorf("path %q resolved to %q, want %q (never a bare name, which $PATH would resolve)", p, path, want)
		}
	}
}

// What a plugin prints before its handshake reaches the launch error with
// its terminal escapes written as Go escapes and bounded (#41, also seen:
// a plugin's pre-handshake stdout, escapes included, was echoed raw), and
// so do its stderr lines.
func TestPreHandshakeOutputPrintable(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\nprintf '\\033[31merr\\033]0;title\\007\\r\\n' >&2\nprintf '\\033[2J\\033[31mnot a handshake\\r%05000d\\n' 0\nsleep 5\n"
	path := filepath.Join(dir, "noisy")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Launch(context.Background(), LaunchSpec{Path: path, Logger: quietLogger(t)})
	if err == nil {
		t.Fatal("Launch succeeded")
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\x1b\r\a") {
		t.Errorf("launch error holds raw control characters: %q", msg)
	}
	for _, want := range []string{`\x1b[2J\x1b[31mnot a handshake\r0000`, "bytes more)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("launch error lacks %q:\n%s", want, msg)
		}
	}
	if len(msg) > 3*maxEchoed {
		t.Errorf("launch error of %d bytes, want the plugin's output bounded", len(msg))
	}
}

// The plugin's stderr lines quoted in messages are printable too.
func TestRingTailPrintable(t *testing.T) {
	r := newRing(4)
	r.add("\x1b[31merr\x1b]0;title\a\r")
	if got, want := r.tail(), `  \x1b[31merr\x1b]0;title\a\r`; got != want {
		t.Errorf("tail = %q, want %q", got, want)
	}
}

func TestPrintable(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"plain text\n\tstack", 100, "plain text\n\tstack"},
		{"\x1b[2Jred\r\a", 100, `\x1b[2Jred\r\a`},
		{"bidi \u202e and \xff", 100, `bidi \u202e and \xff`},
		{"abcdefghij", 4, "abcd… (6 bytes more)"},
		{"ééé", 3, "é… (4 bytes more)"},
	}
	for _, tt := range tests {
		if got := printable(tt.in, tt.max); got != tt.want {
			t.Errorf("printable(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}

package cli_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/optlab/optlab/host/curves"
	"github.com/optlab/optlab/host/results"
)

const killTOML = `name = "killed"

[data]
dataset = "uci-digits"

[model]
archs = ["cnn"]

[train]
epochs = 5
batch_size = 32
seeds = [1]
threads = 1
device = "cpu"
checkpoint = true

[train.optimizer]
name = "sgd"
lr = 0.05
momentum = 0.9
weight_decay = 5e-4

[train.schedule]
kind = "cosine"

[[method]]
name = "SAM"
plugin = "sam"
[method.params]
rho = 0.05
`

// TestKill9Resume kills the host with SIGKILL in the middle of a run, after
// at least two epochs finished, reruns it, and checks that the run resumes
// from its last finished epoch and ends bitwise where an uninterrupted run
// ends (CPU).
func TestKill9Resume(t *testing.T) {
	dir := t.TempDir()
	exp := filepath.Join(dir, "killed.toml")
	if err := os.WriteFile(exp, []byte(killTOML), 0o644); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, "full")
	if r := host(t, "run", "-q", "--plugins", pluginDir, "--results", full, exp); r.code != 0 {
		t.Fatalf("uninterrupted run: exit code %d\n%s", r.code, r.stderr)
	}

	cut := filepath.Join(dir, "cut")
	var stderr bytes.Buffer
	cmd := exec.Command(hostBin, "run", "-q", "--plugins", pluginDir, "--results", cut, exp)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	curveDir := results.NewLayout(cut, "killed").Curves()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		rows := 0
		if files, _ := filepath.Glob(filepath.Join(curveDir, "*.csv")); len(files) == 1 {
			if r, err := curves.Read(files[0]); err == nil {
				rows = len(r)
			}
		}
		if rows >= 2 {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("host exited before it could be killed (%v):\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("two epochs did not finish in time")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	if b, _ := os.ReadFile(results.NewLayout(cut, "killed").Runs()); len(b) > 0 {
		t.Skip("the run finished before SIGKILL reached it; nothing to resume")
	}
	state, _ := filepath.Glob(filepath.Join(cut, "killed", "state", "*.safetensors"))
	if len(state) != 1 {
		t.Fatalf("training state files after the kill: %v", state)
	}

	r := host(t, "run", "--plugins", pluginDir, "--results", cut, exp)
	if r.code != 0 {
		t.Fatalf("rerun: exit code %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "resuming after epoch") {
		t.Errorf("the rerun did not resume:\n%s", r.stderr)
	}
	a, b := readRecords(t, results.NewLayout(full, "killed").Runs()), readRecords(t, results.NewLayout(cut, "killed").Runs())
	for key, ra := range a {
		rb, ok := b[key]
		if !ok {
			t.Fatalf("run %s missing after the resume", key)
		}
		for _, m := range []string{"acc", "nll", "brier", "ece", "train_loss"} {
			if ra.Metrics[m] != rb.Metrics[m] {
				t.Errorf("%s %s: resumed %v, uninterrupted %v", key, m, rb.Metrics[m], ra.Metrics[m])
			}
		}
		if ra.Steps != rb.Steps {
			t.Errorf("%s: %d steps resumed, %d uninterrupted", key, rb.Steps, ra.Steps)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(cut, "killed", "state", "*")); len(left) != 0 {
		t.Errorf("training state left after the run finished: %v", left)
	}
}

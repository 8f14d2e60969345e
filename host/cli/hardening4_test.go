package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/internal/testutil"

	"github.com/optlab/optlab/host/results"
)

// autoPlugin is the Python plugin of ../shared/repro/hardening4/02: its
// "auto" scale resolves to NaN. Its step reports loss and accuracy from
// the program (p.report_metrics) when report is true, else returns the
// registers themselves as its metrics, as the script's plugin does.
const autoPlugin = `#!/usr/bin/python3
import sys; sys.path.insert(0, %q)
import optlab
from dataclasses import dataclass
@dataclass
class Params:
    scale: float = optlab.param(-1.0, doc="-1: auto")
class O(optlab.Optimizer):
    def info(self): return optlab.Info(name="auto", version="0.1.0", params=optlab.specs(Params))
    def configure(self, host, config):
        self.hs = config.namespace("auto"); self.g = self.hs.new("g")
        host.exec(self.hs.prog().alloc(self.g, 0))
    def resolved(self): return {"scale": float("nan")}
    def step(self, host, inp):
        p = self.hs.prog(); ev = p.grad(self.g, optlab.PARAMS); p.base_step(optlab.PARAMS, self.g)
        if %s:
            p.report_metrics(ev.loss, ev.acc); host.exec(p); return {}
        host.exec(p); return optlab.metrics(ev.loss, ev.acc)
if __name__ == "__main__": optlab.serve(O)
`

// A plugin whose resolved value is NaN has its run recorded, the value
// written as "NaN", and the grid goes on (hardening4/02).
//
// The script 02-plugin-resolved-nan-aborts-grid.sh expects runs.jsonl to
// hold exactly one Auto and one SGD record after two `host run`s, and
// finds Auto twice. Its expectation is wrong, not the host: its plugin's
// step returns the loss and accuracy registers as its metrics
// (optlab.metrics(ev.loss, ev.acc)), which the Python SDK refuses at the
// first Step with a message saying to report them from the program. So
// the run fails for that bug, not for the NaN; it is recorded failed
// (with the NaN resolved value encoded), SGD after it trains, and the
// second `host run` runs the failed run again, as it does every failed
// run (docs/EXPERIMENTS.md), which appends a second failed record. With a
// step that reports its metrics the NaN run is recorded ok once, and the
// second `host run` skips both runs.
func TestResolvedNaNPluginRecorded(t *testing.T) {
	testutil.NeedPython(t)
	sdk, err := filepath.Abs(filepath.Join("..", "..", "sdk", "python"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		report  bool
		methods []string // of the records after two `host run`s, in order
		status  string
		errText string
	}{
		{"step reports its metrics", true, []string{"Auto", "SGD"}, results.StatusOK, ""},
		{"the script's step returns registers", false, []string{"Auto", "SGD", "Auto"}, results.StatusFailed,
			"step returned the register(s) of 'loss', 'acc' as metrics"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			script := filepath.Join(dir, "auto.py")
			report := "False"
			if tt.report {
				report = "True"
			}
			if err := os.WriteFile(script, []byte(fmt.Sprintf(autoPlugin, sdk, report)), 0o755); err != nil {
				t.Fatal(err)
			}
			s := spec{Name: "auto", Methods: []method{{Name: "Auto", Plugin: "PATH"}, {Name: "SGD", Plugin: "sgd"}}}
			exp := s.write(t, dir)
			b, err := os.ReadFile(exp)
			if err != nil {
				t.Fatal(err)
			}
			text := strings.ReplaceAll(string(b), `plugin = "PATH"`, "path = "+tomlString(script))
			if err := os.WriteFile(exp, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			res := filepath.Join(dir, "results")
			for range 2 {
				host(t, "run", "-q", "--plugins", pluginDir, "--results", res, exp)
			}
			recs, err := results.Read(results.NewLayout(res, s.Name).Runs())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range recs {
				got = append(got, r.Method)
				switch r.Method {
				case "SGD":
					if r.Status != results.StatusOK {
						t.Errorf("SGD: status %q (%s), want ok", r.Status, r.Error)
					}
				case "Auto":
					if r.Status != tt.status || !strings.Contains(r.Error, tt.errText) {
						t.Errorf("Auto: status %q, error %q; want %q with %q", r.Status, r.Error, tt.status, tt.errText)
					}
					line, err := results.Marshal(r)
					if err != nil || !strings.Contains(string(line), `"params.scale":"NaN"`) {
						t.Errorf("Auto: record %s (%v) lacks the resolved NaN", line, err)
					}
				}
			}
			if strings.Join(got, " ") != strings.Join(tt.methods, " ") {
				t.Errorf("records after two runs: %v, want %v", got, tt.methods)
			}
		})
	}
}

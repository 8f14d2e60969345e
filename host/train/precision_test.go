package train

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/sdk/optim"
)

// TestBF16EveryBuiltinMethod: with train.precision = "bf16" every built-in
// method (each plugin of the registry, the variational and ensemble
// configurations included) trains 2 steps and is evaluated without error,
// with a finite training loss and test NLL, and its record carries the
// key; none of the plugins knows about it. One case also lays the
// convolutions out channels_last.
func TestBF16EveryBuiltinMethod(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	bf16 := strings.NewReplacer("epochs = 3", "epochs = 1\nmax_steps = 2\nprecision = \"bf16\"").Replace(digitsTOML)
	two := strings.Replace(bf16, `archs = ["cnn"]`, `archs = ["cnn*2"]`, 1)
	vi := strings.Replace(bf16, "[train]", "variational = true\n[train]", 1)
	local := strings.Replace(bf16, "[train]", "variational = true\n[model.variational_opts]\nlocal_reparam = true\n[train]", 1)
	// SWA averages at epoch ends: two short epochs, the second the SWA
	// phase, then Finalize's UpdateBN of the average (cnn has BatchNorm).
	swa := strings.NewReplacer("epochs = 3", "epochs = 2\nprecision = \"bf16\"").Replace(digitsTOML)
	cl := strings.Replace(bf16, `archs = ["cnn"]`, `archs = ["resnet10"]`+"\nmemory_format = \"channels_last\"", 1)
	reg := builtin.Registry()
	cases := []struct {
		name, method, toml string
		params             map[string]any
	}{
		{"sgd", "sgd", bf16, nil},
		{"sgd resnet10 channels_last", "sgd", cl, nil},
		{"sam", "sam", bf16, map[string]any{"rho": 0.05}},
		{"asam", "sam", bf16, map[string]any{"rho": 0.5, "adaptive": true}},
		{"looksam", "looksam", bf16, map[string]any{"k": int64(2)}},
		{"aesam", "aesam", bf16, nil},
		{"fsam", "fsam", bf16, nil},
		{"wsam", "wsam", bf16, nil},
		{"gsam", "gsam", bf16, nil},
		{"esam", "esam", bf16, map[string]any{"beta": 0.5, "gamma": 0.5}},
		{"msam", "msam", bf16, nil},
		{"bsam", "bsam", bf16, nil},
		{"adamw", "adamw", bf16, nil},
		{"muon", "muon", bf16, nil},
		{"sam over muon", "sam", bf16, map[string]any{"update": "muon"}},
		{"shampoo", "shampoo", bf16, map[string]any{"precondition_frequency": int64(5)}},
		{"sam over shampoo", "sam", bf16, map[string]any{"update": "shampoo"}},
		{"soap", "soap", bf16, map[string]any{"precondition_frequency": int64(2)}},
		{"otmdr", "otmdr", bf16, nil},
		{"otmdr joint", "otmdr", two, map[string]any{"joint": true}},
		{"sgvb", "sgvb", vi, nil},
		{"sgvb local", "sgvb", local, nil},
		{"otmdr-sgvb", "otmdr-sgvb", vi, nil},
		{"deep ensemble of sam", "ensembles", two, map[string]any{"kind": "deep", "member": "sam"}},
		{"dst", "dst", two, map[string]any{"update_frequency": int64(1)}},
		{"edst", "edst", two, map[string]any{"update_frequency": int64(1)}},
		{"swa of sam", "swa", swa, map[string]any{"member": "sam", "sam_rho": 0.05, "start_epoch": int64(1)}},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.method] = true
	}
	for _, name := range reg.Names() {
		if !covered[name] {
			t.Errorf("built-in method %q has no bf16 case", name)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opt, err := reg.New(c.method)
			if err != nil {
				t.Fatal(err)
			}
			r, exp := newRunner(t, w, c.toml)
			if exp.Model.MemoryFormat == experiment.MemoryChannelsLast {
				if err := w.Do(context.Background(), func() error { return tensor.ChannelsLastSound(tensor.CPU) }); err != nil {
					t.Skip(err) // the run is refused (TestChannelsLastRefusedWhenUnsound)
				}
			}
			rec := runOnce(t, r, exp, opt, c.params)
			for _, k := range []string{"train_loss", "nll"} {
				if v, ok := rec.Metrics[k]; !ok || math.IsNaN(v) || math.IsInf(v, 0) {
					t.Errorf("%s = %v (present %v), want finite", k, v, ok)
				}
			}
			if got := rec.Config["train.precision"]; got != experiment.PrecisionBF16 {
				t.Errorf("record's train.precision = %v, want bf16", got)
			}
			if c.name == "sgd resnet10 channels_last" {
				if got := rec.Config["model.memory_format"]; got != experiment.MemoryChannelsLast {
					t.Errorf("record's model.memory_format = %v, want channels_last", got)
				}
			}
		})
	}
	// The worker's thread is back to float32 afterwards.
	err := w.Do(context.Background(), func() error {
		st, err := tensor.AutocastStatus(tensor.CPU)
		if err == nil && st.Enabled {
			t.Errorf("autocast left on: %+v", st)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNumericsRecordedOnlyWhenSet: an fp32, contiguous run's configuration
// has neither key (so records of runs from before they existed stay the
// same configuration); bf16 and channels_last are recorded. channels_last
// is refused at build for an architecture without convolutions.
func TestNumericsRecordedOnlyWhenSet(t *testing.T) {
	w := tensor.NewWorker(1)
	defer w.Close()
	r, exp := newRunner(t, w, digitsTOML)
	m := method(t, mustNew(t, "sgd"), nil)
	cfg := r.Record(experiment.Grid(exp)[0], m).Config
	for _, k := range []string{"train.precision", "model.memory_format"} {
		if v, ok := cfg[k]; ok {
			t.Errorf("default run records %s = %v", k, v)
		}
	}
	exp.Train.Precision, exp.Model.MemoryFormat = experiment.PrecisionBF16, experiment.MemoryChannelsLast
	cfg = r.Record(experiment.Grid(exp)[0], m).Config
	if cfg["train.precision"] != "bf16" || cfg["model.memory_format"] != "channels_last" {
		t.Errorf("bf16 channels_last run records %v, %v", cfg["train.precision"], cfg["model.memory_format"])
	}
	mlp := strings.Replace(digitsTOML, `archs = ["cnn"]`, `archs = ["mlp"]`+"\nmemory_format = \"channels_last\"", 1)
	r, exp = newRunner(t, w, mlp)
	err := r.Preflight(context.Background(), experiment.Grid(exp)[0], method(t, mustNew(t, "sgd"), nil))
	if err == nil || !strings.Contains(err.Error(), "channels_last") {
		t.Errorf("mlp with channels_last: %v", err)
	}
}

func mustNew(t *testing.T, name string) optim.Optimizer {
	t.Helper()
	opt, err := builtin.Registry().New(name)
	if err != nil {
		t.Fatal(err)
	}
	return opt
}

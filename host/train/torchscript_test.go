package train

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/checkpoint/statedict"
	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/internal/torchtwin"
	"github.com/optlab/optlab/plugins/otmdr"
	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/optim"
)

// TestTorchScriptFollowsBuiltinCNN: optlab's cnn, scripted from its
// PyTorch twin (bench/torch_models.py --script) with the built-in cnn's
// initial weights for the run's seed, trains through "torchscript:" to the
// built-in cnn's trajectory (the same batches: the same seed), with SGD and
// with SAM (whose second pass freezes BatchNorm), and with SGD under bf16
// autocast, over 44 steps: final parameters and BatchNorm statistics
// within 1e-6 relative. The module's BatchNorms have PyTorch's momentum,
// optlab's (0.1), or another (0.3), which the host rescales to optlab's.
func TestTorchScriptFollowsBuiltinCNN(t *testing.T) {
	torchtwin.Script(t) // skips without PyTorch
	w := tensor.NewWorker(2)
	defer w.Close()
	ctx := context.Background()
	r, exp := newRunner(t, w, digitsTOML)
	exp.Train.Epochs = 2
	dir := t.TempDir()
	run := experiment.Grid(exp)[0]
	init := filepath.Join(dir, "init.safetensors")
	builtinInit(t, r, run.Seed, init)
	var archs []string
	for _, mom := range []string{"0.1", "0.3"} {
		pt := filepath.Join(dir, "cnn-"+mom+".pt")
		scriptCNN(t, pt, "--init", init, "--bn-momentum", mom)
		archs = append(archs, experiment.TorchScriptPrefix+pt)
	}
	exp.Model.Archs = append([]string{"cnn"}, archs...)
	runs := experiment.Grid(exp)
	if len(runs) != 3 {
		t.Fatalf("%d runs, want 3", len(runs))
	}
	r.Checkpoints = &results.Layout{Dir: t.TempDir()}
	start := readState(t, init)
	for _, tc := range []struct {
		name      string
		opt       optim.Optimizer
		params    map[string]any
		precision string
	}{
		{"SGD", sgd.New(), nil, experiment.PrecisionFP32},
		{"SAM", sam.New(), map[string]any{"rho": 0.05}, experiment.PrecisionFP32},
		{"SGD-bf16", sgd.New(), nil, experiment.PrecisionBF16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp.Train.Precision = tc.precision
			if tc.precision == experiment.PrecisionBF16 {
				if _, err := tensor.AutocastAvailable(); err != nil {
					t.Skip(err)
				}
			}
			var final []map[string][]float32
			var recs []results.Record
			for _, run := range runs {
				rec, err := r.Run(ctx, run, method(t, tc.opt, tc.params))
				if err != nil {
					t.Fatal(err)
				}
				if rec.Status != results.StatusOK {
					t.Fatalf("%s: status %q: %s", run.Arch, rec.Status, rec.Error)
				}
				recs, final = append(recs, rec), append(final, readState(t, r.Checkpoints.Model(run.Key)))
			}
			if moved := relDiff(t, final[0], start); moved < 1e-2 {
				t.Fatalf("the built-in cnn moved by %.3g relative: no trajectory to compare", moved)
			}
			for i := 1; i < len(runs); i++ {
				if d := relDiff(t, final[i], final[0]); d > 1e-6 {
					t.Errorf("%s: after %d steps %.3g (relative) from the built-in cnn, want ≤ 1e-6", runs[i].Arch, recs[0].Steps, d)
				} else {
					t.Logf("%s: after %d steps %.3g (relative) from the built-in cnn", runs[i].Arch, recs[0].Steps, d)
				}
				// bf16 evaluation rounds a statistic 1e-7 away to another
				// bf16 value now and then: a looser bound on the NLL.
				tol := 1e-6
				if tc.precision == experiment.PrecisionBF16 {
					tol = 1e-4
				}
				if a, b := recs[0].Metrics["nll"], recs[i].Metrics["nll"]; math.Abs(a-b) > tol*math.Abs(a) {
					t.Errorf("%s: test NLL %v, the built-in cnn's %v", runs[i].Arch, b, a)
				}
			}
		})
	}
}

// TestTorchScriptUpdateBN: UpdateBN recomputes a TorchScript cnn's
// BatchNorm statistics as it does the built-in cnn's (a cumulative average,
// momentum 1/(k+1) for batch k, which the host rescales from the module's
// own momentum).
func TestTorchScriptUpdateBN(t *testing.T) {
	torchtwin.Script(t) // skips without PyTorch
	w := tensor.NewWorker(2)
	defer w.Close()
	ctx := context.Background()
	r, _ := newRunner(t, w, digitsTOML)
	dir := t.TempDir()
	init := filepath.Join(dir, "init.safetensors")
	builtinInit(t, r, 7, init)
	pt := filepath.Join(dir, "cnn.pt")
	scriptCNN(t, pt, "--init", init)
	var stats [2][]float32
	for i, arch := range []string{"cnn", experiment.TorchScriptPrefix + pt} {
		e := freshEngine(t, r, experiment.Run{Members: []string{arch}})
		if err := statedict.Load(ctx, e, init); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Exec(ctx, optim.NewHandles().Prog().UpdateBN(optim.Params)); err != nil {
			t.Fatal(err)
		}
		stats[i] = liveStats(t, e)
	}
	var num, den float64
	for i := range stats[0] {
		d := float64(stats[1][i]) - float64(stats[0][i])
		num, den = num+d*d, den+float64(stats[0][i])*float64(stats[0][i])
	}
	if d := math.Sqrt(num / den); d > 1e-6 || den == 0 {
		t.Errorf("UpdateBN's statistics: TorchScript %.3g (relative) from the built-in cnn's, want ≤ 1e-6", d)
	} else {
		t.Logf("%.3g relative", d)
	}
}

// scriptCNN saves optlab's cnn for the digits (10 classes, 1×8×8), scripted
// from its PyTorch twin, at pt; args add torch_models.py's options (--init
// CKPT, --bn-momentum M).
func scriptCNN(t *testing.T, pt string, args ...string) {
	t.Helper()
	torchtwin.Run(t, append([]string{"--script", pt, "--arch", "cnn", "--classes", "10", "--in-shape", "1,8,8"}, args...)...)
}

// builtinInit writes the built-in cnn's initial state for a seed as a
// state dict.
func builtinInit(t *testing.T, r *Runner, seed int64, path string) {
	t.Helper()
	cnn, err := model.Builtin().New("cnn", r.Data.Classes, r.Data.Shape)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	eng, err := engine.New(ctx, r.W, engine.Config{Device: r.Dev, Seed: seed}, []*model.Model{cnn})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if err := statedict.Save(ctx, eng, path); err != nil {
		t.Fatal(err)
	}
}

// readState reads a state dict's float tensors (parameters and BatchNorm
// statistics) by name.
func readState(t *testing.T, path string) map[string][]float32 {
	t.Helper()
	ts, _, err := checkpoint.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float32{}
	for name, x := range ts {
		if x.DType != checkpoint.F32 {
			continue
		}
		v, err := x.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		out[name] = v
	}
	return out
}

// relDiff is ‖a − b‖ / ‖b‖ over every tensor of b, which a must have too.
func relDiff(t *testing.T, a, b map[string][]float32) float64 {
	t.Helper()
	var num, den float64
	for name, bv := range b {
		av, ok := a[name]
		if !ok || len(av) != len(bv) {
			t.Fatalf("%s: %d values against %d", name, len(av), len(bv))
		}
		for i := range bv {
			d := float64(av[i]) - float64(bv[i])
			num += d * d
			den += float64(bv[i]) * float64(bv[i])
		}
	}
	return math.Sqrt(num / den)
}

// TestTorchScriptResNetFromNumPy: the worked example of "Your own model and
// data" (examples/torchscript: a torchvision-style ResNet scripted in
// PyTorch, the digits as an .npz file), narrowed to width 16 and one epoch,
// trains with SAM and with OT-MDR, and each run's saved state dict loads
// back into the PyTorch module (load_state_dict, strict), whose test
// accuracy there is the run's.
func TestTorchScriptResNetFromNumPy(t *testing.T) {
	torchtwin.Script(t) // skips without PyTorch
	example := filepath.Join("..", "..", "examples", "torchscript")
	dir := t.TempDir()
	exportPy, err := filepath.Abs(filepath.Join(example, "export.py"))
	if err != nil {
		t.Fatal(err)
	}
	size := []string{"--width", "16", "--blocks", "1,1,1,1"}
	torchtwin.Exec(t, append([]string{exportPy, "--out", filepath.Join(dir, "out")}, size...)...)
	text, err := os.ReadFile(filepath.Join(example, "resnet.toml"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "resnet.toml")
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	exp, err := experiment.Load(path, "train.epochs=1")
	if err != nil {
		t.Fatal(err)
	}
	if err := experiment.Validate(exp, model.Builtin().Names()); err != nil {
		t.Fatal(err)
	}
	w := tensor.NewWorker(2)
	defer w.Close()
	ctx := context.Background()
	d, err := devset.Load(ctx, w, tensor.CPU, exp.Data.Spec())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Drop()
	r := &Runner{W: w, Dev: tensor.CPU, Exp: exp, Data: d, Zoo: model.Builtin(), Checkpoints: &results.Layout{Dir: dir}}
	opts := map[string]optim.Optimizer{"SAM": sam.New(), "OT-MDR": otmdr.New()}
	ran := 0
	for _, run := range experiment.Grid(exp) {
		opt, ok := opts[run.Method.Name]
		if !ok {
			continue
		}
		ran++
		rec, err := r.Run(ctx, run, method(t, opt, run.Method.Params))
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != results.StatusOK || rec.Steps == 0 {
			t.Fatalf("%s: status %q after %d steps: %s", run.Key, rec.Status, rec.Steps, rec.Error)
		}
		out := torchtwin.Exec(t, append([]string{exportPy, "--out", filepath.Join(dir, "out"), "--check", r.Checkpoints.Model(run.Key)}, size...)...)
		var acc float64
		if _, err := fmt.Sscanf(strings.TrimSpace(out), "acc %g", &acc); err != nil {
			t.Fatalf("unexpected output %q: %v", out, err)
		}
		if got := rec.Metrics["acc"]; math.Abs(acc-got) > 1e-9 {
			t.Errorf("%s: the state dict loaded into PyTorch scores %v, the run %v", run.Method.Name, acc, got)
		} else {
			t.Logf("%s: %d steps, test accuracy %v in optlab and in PyTorch", run.Method.Name, rec.Steps, acc)
		}
	}
	if ran != 2 {
		t.Fatalf("the example has %d of the SAM and OT-MDR methods", ran)
	}
}

// A TorchScript arch in a variational experiment is refused when the run is
// built (host check's preflight), naming the arch.
func TestTorchScriptRefusesVariational(t *testing.T) {
	torchtwin.Script(t) // skips without PyTorch
	w := tensor.NewWorker(1)
	defer w.Close()
	r, exp := newRunner(t, w, digitsTOML)
	pt := filepath.Join(t.TempDir(), "cnn.pt")
	scriptCNN(t, pt)
	exp.Model.Archs = []string{experiment.TorchScriptPrefix + pt}
	exp.Model.Variational = true
	err := r.Preflight(context.Background(), experiment.Grid(exp)[0], method(t, sgd.New(), nil))
	if err == nil || !strings.Contains(err.Error(), "model.variational = true: torchscript:"+pt+" is a TorchScript module") {
		t.Fatalf("got %v", err)
	}
}

// model.torchscript_init = "reset" draws a TorchScript module's
// convolution, linear and BatchNorm parameters per member and seed as
// torch.nn's reset_parameters() would (two members of one file start
// apart; a BatchNorm starts at weight 1, bias 0; every weight within
// ±1/√fan_in); "file" starts every member from the file's weights.
func TestTorchScriptResetInit(t *testing.T) {
	torchtwin.Script(t) // skips without PyTorch
	w := tensor.NewWorker(1)
	defer w.Close()
	ctx := context.Background()
	r, exp := newRunner(t, w, digitsTOML)
	pt := filepath.Join(t.TempDir(), "cnn.pt")
	scriptCNN(t, pt)
	exp.Model.Archs = []string{experiment.TorchScriptPrefix + pt + "*2"}
	members := func(init string) [2]map[string][]float32 {
		exp.Model.TorchScriptInit = init
		tr, err := r.build(ctx, experiment.Grid(exp)[0], method(t, sgd.New(), nil))
		if err != nil {
			t.Fatal(err)
		}
		defer tr.eng.Close()
		var out [2]map[string][]float32
		for m := range out {
			ts, err := statedict.Export(ctx, tr.eng, m)
			if err != nil {
				t.Fatal(err)
			}
			out[m] = map[string][]float32{}
			for _, x := range ts {
				if x.DType == checkpoint.F32 {
					out[m][x.Name], _ = x.Float32s()
				}
			}
		}
		return out
	}
	file, reset := members(experiment.TorchScriptInitFile), members(experiment.TorchScriptInitReset)
	if d := relDiff(t, file[1], file[0]); d != 0 {
		t.Errorf("init file: the members differ by %g", d)
	}
	if d := relDiff(t, reset[1], reset[0]); d < 0.5 {
		t.Errorf("init reset: the members differ by only %g", d)
	}
	if d := relDiff(t, reset[0], file[0]); d < 0.5 {
		t.Errorf("init reset: the member is %g from the file's weights", d)
	}
	for name, v := range reset[0] {
		var want float32 = -1
		switch name {
		case "features.0.bn.weight":
			want = 1
		case "features.0.bn.bias":
			want = 0
		}
		bound := 1 / math.Sqrt(9) // features.0.conv.weight: fan_in 1·3·3
		for _, x := range v {
			if want >= 0 && x != want {
				t.Fatalf("%s = %v, want %v", name, x, want)
			}
			if name == "features.0.conv.weight" && math.Abs(float64(x)) > bound {
				t.Fatalf("%s has %v, beyond ±%v", name, x, bound)
			}
		}
	}
}

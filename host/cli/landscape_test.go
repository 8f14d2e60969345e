package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/checkpoint/statedict"
	"github.com/optlab/optlab/host/curves"
	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/eval"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/landscape"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/optim"
)

// landscapeTOML is a tiny CNN experiment on the UCI digits; %s is the
// results folder.
const landscapeTOML = `
name = "landscape-test"
results_dir = %q
[data]
dataset = "uci-digits"
[model]
archs = ["cnn"]
[train]
epochs = 1
batch_size = 64
eval_batch_size = 500
seeds = [1]
device = "cpu"
threads = 2
[train.optimizer]
name = "sgd"
lr = 0.05
momentum = 0.9
[[method]]
name = "SGD"
plugin = "sgd"
`

// landscapeRunKey is the run the second test checkpoint belongs to.
var landscapeRunKey = experiment.RunKey("SGD", "cnn", 1)

// trainedEngine trains members cnn models with SGD for steps steps on the
// experiment's data and returns the engine (closed by t.Cleanup).
func trainedEngine(t *testing.T, w *tensor.Worker, d *devset.Data, members, steps int, seed int64) *engine.Engine {
	t.Helper()
	ctx := context.Background()
	models := make([]*model.Model, members)
	for i := range models {
		m, err := model.Builtin().New("cnn", d.Classes, d.Shape)
		if err != nil {
			t.Fatal(err)
		}
		models[i] = m
	}
	eng, err := engine.New(ctx, w, engine.Config{Device: tensor.CPU, Seed: seed, Base: engine.BaseConfig{Name: "sgd", Momentum: 0.9},
		TrainSize: int64(d.TrainSize), BatchSize: 64}, models)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	opt := sgd.New()
	if err := opt.Configure(ctx, eng, optim.Config{Params: map[string]any{}, Seed: seed, Members: members}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 3))
	for step := 0; step < steps; step++ {
		idx := make([]int64, 64)
		for i := range idx {
			idx[i] = int64(rng.IntN(d.TrainSize))
		}
		err := w.Do(ctx, func() error {
			s := tensor.NewScope()
			defer s.Close()
			x, y := d.Train.Batch(s, idx, devset.Augment{}, rng, tensor.CPU)
			if err := s.Err(); err != nil {
				return err
			}
			x, y = s.Keep(x), s.Keep(y)
			for m := 0; m < members; m++ {
				eng.SetBatch(m, x, y)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		eng.BeginStep(int64(step), 0.05)
		if _, err := opt.Step(ctx, optim.StepInput{Step: int64(step), LR: 0.05}); err != nil {
			t.Fatal(err)
		}
	}
	return eng
}

// nll is the mean negative log-likelihood of the first n samples of set
// under member 0's point predictive, computed through Predict (softmax
// probabilities), independently of EvalAt.
func nll(t *testing.T, eng *engine.Engine, w *tensor.Worker, set *devset.Set, n int64) float64 {
	t.Helper()
	ctx := context.Background()
	probs, err := eval.Predict(ctx, eng, optim.Predictive{Kind: optim.Point}, set, 500, 0)
	if err != nil {
		t.Fatal(err)
	}
	var labels []int32
	if err := w.Do(ctx, func() error {
		s := tensor.NewScope()
		defer s.Close()
		labels = set.Labels(s)
		return s.Err()
	}); err != nil {
		t.Fatal(err)
	}
	if n <= 0 || n > set.N {
		n = set.N
	}
	var sum float64
	for i := int64(0); i < n; i++ {
		sum -= math.Log(probs[i*int64(set.Classes)+int64(labels[i])])
	}
	return sum / float64(n)
}

// readScan reads a scan CSV and returns its points and its α = β = 0 one.
func readScan(t *testing.T, path string) ([]landscape.Point, landscape.Point) {
	t.Helper()
	pts, _, err := landscape.ReadCSV(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pts {
		if p.Alpha == 0 && p.Beta == 0 {
			return pts, p
		}
	}
	t.Fatalf("%s has no point at the centre", path)
	return nil, landscape.Point{}
}

func checkPNGFile(t *testing.T, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) < 10000 {
		t.Errorf("%s: only %d bytes", path, len(raw))
	}
	if _, err := png.Decode(bytes.NewReader(raw)); err != nil {
		t.Errorf("%s: %v", path, err)
	}
}

func TestLandscapeCmd(t *testing.T) {
	dir := t.TempDir()
	resDir := filepath.Join(dir, "results")
	expPath := filepath.Join(dir, "exp.toml")
	if err := os.WriteFile(expPath, []byte(strings.Replace(landscapeTOML, "%q", `"`+resDir+`"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	exp, err := experiment.Load(expPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w := tensor.NewWorker(2)
	defer w.Close()
	d, err := devset.Load(ctx, w, tensor.CPU, exp.Data.Spec())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Drop()

	// Checkpoint A: written by statedict.Save (no run metadata).
	engA := trainedEngine(t, w, d, 1, 40, 1)
	ckA := filepath.Join(dir, "sgd-long.safetensors")
	if err := statedict.Save(ctx, engA, ckA); err != nil {
		t.Fatal(err)
	}
	// Checkpoint B: member tensors from statedict.Export, with metadata naming
	// its run, which has a record in runs.jsonl.
	engB := trainedEngine(t, w, d, 1, 8, 2)
	ts, err := statedict.Export(ctx, engB, 0)
	if err != nil {
		t.Fatal(err)
	}
	ckB := filepath.Join(dir, "sgd-short.safetensors")
	meta := map[string]string{"format": "pt", "optlab.archs": "cnn", "run_key": landscapeRunKey, "experiment": exp.Name}
	if err := checkpoint.Write(ckB, ts, meta); err != nil {
		t.Fatal(err)
	}
	runs := results.NewLayout(resDir, exp.Name).Runs()
	rec := results.Record{Experiment: exp.Name, Key: landscapeRunKey, Method: "SGD", Status: results.StatusOK, Dataset: "uci-digits",
		Arch: "cnn", Seed: 1, Config: map[string]any{"plugin": "sgd"}, Metrics: map[string]float64{"acc": 0.5},
		Finished: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	if err := results.Append(runs, rec); err != nil {
		t.Fatal(err)
	}
	// Checkpoint C: a two-member (ensemble) checkpoint; member 0 is probed.
	engC := trainedEngine(t, w, d, 2, 4, 3)
	ckC := filepath.Join(dir, "sub", "sgd-long.safetensors") // same base name as A
	if err := os.MkdirAll(filepath.Dir(ckC), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := statedict.Save(ctx, engC, ckC); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "out")
	const samples = 300
	var stdout, stderr bytes.Buffer
	err = landscapeCmd(ctx, []string{"--checkpoint", ckA, "--checkpoint", ckB, "--checkpoint", ckC, "--experiment", expPath,
		"--steps", "5", "--radius", "0.5", "--2d", "--samples", "300", "--out", out, "-q"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("landscape: %v\nstderr:\n%s", err, stderr.String())
	}
	t.Logf("stdout:\n%s", stdout.String())
	for _, want := range []string{"sgd-long", "sgd-short", "sgd-long-2", "sharpness_r0.5", landscapeRunKey} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	for _, f := range []string{"landscape_1d.png", "sgd-long_2d.png", "sgd-short_2d.png", "sgd-long-2_2d.png"} {
		checkPNGFile(t, filepath.Join(out, f))
	}
	raw, err := os.ReadFile(filepath.Join(out, "landscape.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Metric       string `json:"metric"`
		TrainSamples int64  `json:"train_samples"`
		TestSamples  int64  `json:"test_samples"`
		Checkpoints  []struct {
			Label     string   `json:"label"`
			Recorded  bool     `json:"recorded"`
			Files     []string `json:"files"`
			Sharpness struct {
				Base, Max, Increase, Alpha float64
				Points                     int
			} `json:"sharpness"`
		} `json:"checkpoints"`
	}
	if err := json.Unmarshal(raw, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Metric != "sharpness_r0.5" || sum.TrainSamples != samples || sum.TestSamples != d.Test.N || len(sum.Checkpoints) != 3 {
		t.Fatalf("landscape.json: %s", raw)
	}

	// The scan at α = 0 is the checkpoint's own loss, computed here
	// through Predict on a fresh engine that loads the file.
	engines := []*engine.Engine{engA, engB, engC}
	for i, ck := range sum.Checkpoints {
		line, centre := readScan(t, filepath.Join(out, ck.Files[0]))
		if len(line) != 5 || len(ck.Files) != 3 {
			t.Errorf("%s: %d points, files %v", ck.Label, len(line), ck.Files)
		}
		wantTrain := nll(t, engines[i], w, d.Train, samples)
		wantTest := nll(t, engines[i], w, d.Test, 0)
		if math.Abs(centre.TrainLoss-wantTrain) > 1e-4*math.Max(1, wantTrain) || math.Abs(centre.TestLoss-wantTest) > 1e-4*math.Max(1, wantTest) {
			t.Errorf("%s: loss at α = 0 is %g (train), %g (test); the checkpoint's loss is %g, %g", ck.Label, centre.TrainLoss, centre.TestLoss, wantTrain, wantTest)
		}
		// The sharpness is the largest train-loss increase over the line.
		maxInc := math.Inf(-1)
		for _, p := range line {
			maxInc = math.Max(maxInc, p.TrainLoss-centre.TrainLoss)
		}
		if math.Abs(ck.Sharpness.Increase-maxInc) > 1e-12 || ck.Sharpness.Increase <= 0 || ck.Sharpness.Points != 5 {
			t.Errorf("%s: sharpness %+v, want increase %g over 5 points", ck.Label, ck.Sharpness, maxInc)
		}
		plane, pc := readScan(t, filepath.Join(out, ck.Files[1]))
		if len(plane) != 25 || pc.TrainLoss != centre.TrainLoss {
			t.Errorf("%s: plane of %d points, centre %g (line centre %g)", ck.Label, len(plane), pc.TrainLoss, centre.TrainLoss)
		}
		if ck.Recorded != (ck.Label == "sgd-short") {
			t.Errorf("%s: recorded = %v", ck.Label, ck.Recorded)
		}
	}
	// The same check against a fresh engine that loads checkpoint B.
	mod, _ := model.Builtin().New("cnn", d.Classes, d.Shape)
	fresh, err := engine.New(ctx, w, engine.Config{Device: tensor.CPU}, []*model.Model{mod})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := statedict.Load(ctx, fresh, ckB); err != nil {
		t.Fatal(err)
	}
	_, centreB := readScan(t, filepath.Join(out, "sgd-short_1d.csv"))
	if want := nll(t, fresh, w, d.Test, 0); math.Abs(centreB.TestLoss-want) > 1e-4 {
		t.Errorf("loaded checkpoint B: test loss %g, scan centre %g", want, centreB.TestLoss)
	}

	// runs.jsonl: the run of checkpoint B now has the sharpness.
	recs, err := results.Read(runs)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := results.Merge(recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || len(merged) != 1 {
		t.Fatalf("runs.jsonl has %d records (%d merged), want 2 (1)", len(recs), len(merged))
	}
	got, ok := merged[0].Metrics["sharpness_r0.5"]
	if !ok || got != sum.Checkpoints[1].Sharpness.Increase || merged[0].Metrics["acc"] != 0.5 {
		t.Errorf("merged record metrics %v, want sharpness_r0.5 = %g", merged[0].Metrics, sum.Checkpoints[1].Sharpness.Increase)
	}
}

func TestLandscapeCmdErrors(t *testing.T) {
	dir := t.TempDir()
	expPath := filepath.Join(dir, "exp.toml")
	if err := os.WriteFile(expPath, []byte(strings.Replace(landscapeTOML, "%q", `"`+filepath.Join(dir, "results")+`"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// A checkpoint of another architecture (an mlp's tensors, no metadata).
	mlp, err := model.Builtin().New("mlp", 10, []int64{1, 8, 8})
	if err != nil {
		t.Fatal(err)
	}
	var ts []checkpoint.Tensor
	for _, p := range mlp.Params {
		ts = append(ts, checkpoint.NewF32(p.Name, p.Shape, make([]float32, p.Numel())))
	}
	wrong := filepath.Join(dir, "mlp.safetensors")
	if err := checkpoint.Write(wrong, ts, nil); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no checkpoint", []string{"--experiment", expPath}, "usage"},
		{"no experiment", []string{"--checkpoint", wrong}, "usage"},
		{"bad steps", []string{"--checkpoint", wrong, "--experiment", expPath, "--steps", "0"}, "--steps"},
		{"bad radius", []string{"--checkpoint", wrong, "--experiment", expPath, "--radius", "-1"}, "--radius"},
		{"stray argument", []string{"--checkpoint", wrong, "--experiment", expPath, "extra"}, "unexpected"},
		{"missing checkpoint", []string{"--checkpoint", filepath.Join(dir, "none.safetensors"), "--experiment", expPath}, "none.safetensors"},
		{"missing experiment", []string{"--checkpoint", wrong, "--experiment", filepath.Join(dir, "none.toml")}, "none.toml"},
		{"wrong architecture", []string{"--checkpoint", wrong, "--experiment", expPath, "-q", "--steps", "1"}, "does not match the model"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		err := landscapeCmd(context.Background(), tt.args, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

func TestPlotCmd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results")
	for _, m := range []string{"SGD", "SAM"} {
		for seed := int64(1); seed <= 2; seed++ {
			cw, err := curves.Create(results.NewLayout(dir, "exp").Curve(experiment.RunKey(m, "cnn", seed)))
			if err != nil {
				t.Fatal(err)
			}
			for e := 1; e <= 5; e++ {
				r := curves.NaNRow(e, int64(10*e))
				r.LR, r.TrainLoss, r.TrainAcc, r.Seconds = 0.1, 2/float64(e)+0.1*float64(seed), 1-1/float64(e+1), float64(e)
				if e%2 == 1 {
					r.EvalLoss, r.EvalAcc = 2.2/float64(e), 0.9-0.5/float64(e)-0.01*float64(seed)
				}
				if err := cw.Append(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := cw.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	expDir := filepath.Join(dir, "exp")
	tests := []struct {
		name string
		args []string
		out  string
		want []string
	}{
		{"default", []string{expDir}, filepath.Join(expDir, "test_acc.png"), []string{"SAM", "SGD", "test_acc"}},
		{"two metrics by step", []string{expDir, "--metric", "train_loss,test_loss", "--x", "step", "--out", filepath.Join(dir, "f.png")},
			filepath.Join(dir, "f.png"), []string{"train_loss", "test_loss"}},
		{"curves folder, no band", []string{filepath.Join(expDir, "curves"), "--band=false", "--metric", "train_acc"},
			filepath.Join(expDir, "curves", "train_acc.png"), []string{"exp: 4 runs"}},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		if err := plotCmd(context.Background(), tt.args, &stdout, &stderr); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		checkPNGFile(t, tt.out)
		for _, w := range tt.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%s: stdout lacks %q:\n%s", tt.name, w, stdout.String())
			}
		}
	}
	for _, bad := range [][]string{{}, {expDir, "--metric", "nll"}, {filepath.Join(dir, "none")}, {expDir, "--x", "lr"}} {
		var stdout, stderr bytes.Buffer
		if err := plotCmd(context.Background(), bad, &stdout, &stderr); err == nil {
			t.Errorf("plot %q: no error", bad)
		}
	}
}

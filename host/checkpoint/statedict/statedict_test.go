package statedict

import (
	"context"
	"fmt"
	"github.com/optlab/optlab/internal/torchtwin"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// ckptShape is the per-sample input of the checkpoint tests (CIFAR-sized).
var ckptShape = []int64{3, 32, 32}

// ckptDevices returns the CPU, and the first GPU when there is one.
func ckptDevices(t *testing.T, w *tensor.Worker) []tensor.Device {
	t.Helper()
	devs := []tensor.Device{tensor.CPU}
	_ = w.Do(context.Background(), func() error {
		if d, err := tensor.ParseDevice("cuda"); err == nil {
			devs = append(devs, d)
		}
		return nil
	})
	return devs
}

// ckptEngine builds an engine of the named architectures on dev.
func ckptEngine(t *testing.T, w *tensor.Worker, dev tensor.Device, seed int64, archs ...string) *engine.Engine {
	t.Helper()
	var models []*model.Model
	for _, a := range archs {
		m, err := model.Builtin().New(a, 10, ckptShape)
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, m)
	}
	e, err := engine.New(context.Background(), w, engine.Config{Device: dev, Seed: seed,
		Base: engine.BaseConfig{Name: "sgd", Momentum: 0.9}}, models)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// ckptInput returns n samples of ckptShape drawn from seed.
func ckptInput(n int, seed uint64) ([]float32, []int64) {
	r := rand.New(rand.NewPCG(seed, 1))
	shape := append([]int64{int64(n)}, ckptShape...)
	x := make([]float32, model.Numel(shape))
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x, shape
}

// ckptTrainStep runs one SGD step of every member on a random batch (BatchNorm
// in train mode, so the running statistics move too).
func ckptTrainStep(t *testing.T, e *engine.Engine) {
	t.Helper()
	ctx := context.Background()
	x, shape := ckptInput(8, 7)
	y := []int64{0, 1, 2, 3, 4, 5, 6, 7}
	n := len(e.Members())
	err := e.Worker().Do(ctx, func() error {
		s := tensor.NewScope()
		defer s.Close()
		xt := s.Keep(s.FromFloat32(x, shape, e.Device()))
		yt := s.Keep(s.FromInt64(y, []int64{8}, e.Device()))
		if err := s.Err(); err != nil {
			return err
		}
		for m := range n {
			e.SetBatch(m, xt, yt)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.BeginStep(0, 0.05)
	hs := optim.NewHandles()
	gs := hs.PerMember("g", n)
	p := hs.Prog()
	for m, g := range gs {
		p.Alloc(g, m)
		p.Grad(g, optim.ParamsOf(m), optim.Batch{}, optim.BNUpdate)
		p.BaseStep(optim.ParamsOf(m), g).Free(g)
	}
	if _, err := e.Exec(ctx, p); err != nil {
		t.Fatal(err)
	}
}

// ckptLogits runs member m's eval-mode forward on x.
func ckptLogits(t *testing.T, e *engine.Engine, m int, x []float32, shape []int64) []float32 {
	t.Helper()
	var out []float32
	err := e.Worker().Do(context.Background(), func() error {
		restore, err := tensor.NoGrad()
		if err != nil {
			return err
		}
		defer restore()
		s := tensor.NewScope()
		defer s.Close()
		mem := e.Members()[m]
		out = s.Float32s(mem.Model.Forward(s, mem.Params, mem.Buf, s.FromFloat32(x, shape, e.Device()), false, 0))
		return s.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func ckptMaxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

func TestExportImportMember(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	ctx := context.Background()
	for _, dev := range ckptDevices(t, w) {
		for _, arch := range []string{"mlp", "cnn", "resnet10"} {
			t.Run(arch+"/"+dev.String(), func(t *testing.T) {
				if testing.Short() && arch == "resnet10" {
					t.Skip("resnet10 in -short mode (TestPyTorchInterop covers it)")
				}
				src := ckptEngine(t, w, dev, 1, arch)
				ckptTrainStep(t, src)
				x, shape := ckptInput(5, 3)
				want := ckptLogits(t, src, 0, x, shape)

				ts, err := Export(ctx, src, 0)
				if err != nil {
					t.Fatal(err)
				}
				mod := src.Members()[0].Model
				if got, n := len(ts), len(mod.Params)+len(mod.Buffers)+len(bnCounters(mod)); got != n {
					t.Errorf("exported %d tensors, want %d", got, n)
				}
				byName := map[string]checkpoint.Tensor{}
				for _, tt := range ts {
					if err := tt.Validate(); err != nil {
						t.Fatal(err)
					}
					byName[tt.Name] = tt
				}
				if len(mod.Buffers) > 0 {
					rv := byName[mod.Buffers[1].Name]
					if !strings.HasSuffix(rv.Name, ".running_var") || rv.F32[0] == 1 {
						t.Errorf("%s = %v after a training step, want updated statistics", rv.Name, rv.F32[:1])
					}
				}

				dst := ckptEngine(t, w, dev, 2, arch)
				if d := ckptMaxAbsDiff(ckptLogits(t, dst, 0, x, shape), want); d == 0 {
					t.Fatal("engines with different seeds give the same logits")
				}
				if err := Import(ctx, dst, 0, byName); err != nil {
					t.Fatal(err)
				}
				if d := ckptMaxAbsDiff(ckptLogits(t, dst, 0, x, shape), want); d != 0 {
					t.Errorf("logits after import differ by %g", d)
				}

				// Through a file.
				path := filepath.Join(t.TempDir(), arch+".safetensors")
				if err := Save(ctx, src, path); err != nil {
					t.Fatal(err)
				}
				viaFile := ckptEngine(t, w, dev, 3, arch)
				if err := Load(ctx, viaFile, path); err != nil {
					t.Fatal(err)
				}
				if d := ckptMaxAbsDiff(ckptLogits(t, viaFile, 0, x, shape), want); d != 0 {
					t.Errorf("logits after a file round trip differ by %g", d)
				}
				saved, meta, err := checkpoint.Read(path)
				if err != nil {
					t.Fatal(err)
				}
				if len(saved) != len(ts) || meta["optlab.archs"] != arch || meta["format"] != "pt" {
					t.Errorf("file has %d tensors and metadata %v", len(saved), meta)
				}
			})
		}
	}
}

func TestImportMemberMismatch(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	ctx := context.Background()
	e := ckptEngine(t, w, tensor.CPU, 1, "cnn")
	good, err := Export(ctx, e, 0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		edit   func(map[string]checkpoint.Tensor)
		want   []string
		wantOK bool
	}{
		{"unchanged", func(map[string]checkpoint.Tensor) {}, nil, true},
		{"without num_batches_tracked", func(ts map[string]checkpoint.Tensor) {
			for k := range ts {
				if strings.HasSuffix(k, ".num_batches_tracked") {
					delete(ts, k)
				}
			}
		}, nil, true},
		{"float64", func(ts map[string]checkpoint.Tensor) {
			fw := ts["fc.weight"]
			f, _ := fw.Float32s()
			d := make([]float64, len(f))
			for i, v := range f {
				d[i] = float64(v)
			}
			ts["fc.weight"] = checkpoint.NewF64("fc.weight", fw.Shape, d)
		}, nil, true},
		{"missing, extra, wrong shape, wrong dtype", func(ts map[string]checkpoint.Tensor) {
			delete(ts, "fc.bias")
			delete(ts, "features.0.bn.running_var")
			ts["fc2.weight"] = checkpoint.NewF32("fc2.weight", []int64{1}, []float32{1})
			ts["fc.weight"] = checkpoint.NewF32("fc.weight", []int64{10, 64}, make([]float32, 640))
			ts["features.0.conv.weight"] = checkpoint.NewI64("features.0.conv.weight", []int64{32, 3, 3, 3}, make([]int64, 864))
			ts["features.1.bn.num_batches_tracked"] = checkpoint.NewI64("features.1.bn.num_batches_tracked", []int64{2}, []int64{1, 2})
		}, []string{
			"2 missing: fc.bias, features.0.bn.running_var",
			"1 unexpected: fc2.weight",
			"fc.weight (shape [10, 64], want [10, 128])",
			"features.0.conv.weight (dtype I64, want F32 or F64)",
			"features.1.bn.num_batches_tracked (I64[2], want a scalar)",
		}, false},
		{"a negative count", func(ts map[string]checkpoint.Tensor) {
			ts["features.1.bn.num_batches_tracked"] = checkpoint.NewI64("features.1.bn.num_batches_tracked", []int64{}, []int64{-1})
		}, []string{"features.1.bn.num_batches_tracked (-1, want a whole number ≥ 0)"}, false},
		{"a fractional count", func(ts map[string]checkpoint.Tensor) {
			ts["features.1.bn.num_batches_tracked"] = checkpoint.NewF32("features.1.bn.num_batches_tracked", []int64{}, []float32{2.5})
		}, []string{"features.1.bn.num_batches_tracked (2.5, want a whole number ≥ 0)"}, false},
	}
	x, shape := ckptInput(3, 5)
	before := ckptLogits(t, e, 0, x, shape)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := map[string]checkpoint.Tensor{}
			for _, tt := range good {
				ts[tt.Name] = tt
			}
			tc.edit(ts)
			err := Import(ctx, e, 0, ts)
			if tc.wantOK {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, frag := range tc.want {
				if !strings.Contains(err.Error(), frag) {
					t.Errorf("error %q does not mention %q", err, frag)
				}
			}
			if d := ckptMaxAbsDiff(ckptLogits(t, e, 0, x, shape), before); d != 0 {
				t.Errorf("a failed import changed the logits by %g", d)
			}
		})
	}
	if err := Import(ctx, e, 1, nil); err == nil {
		t.Error("importing into a missing member: no error")
	}
}

func TestCheckpointMembers(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	ctx := context.Background()
	dir := t.TempDir()
	x, shape := ckptInput(4, 9)

	src := ckptEngine(t, w, tensor.CPU, 1, "cnn", "mlp")
	ckptTrainStep(t, src)
	two := filepath.Join(dir, "two.safetensors")
	if err := Save(ctx, src, two); err != nil {
		t.Fatal(err)
	}
	saved, _, err := checkpoint.Read(two)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"members.0.fc.weight", "members.0.features.2.bn.num_batches_tracked", "members.1.fc3.bias"} {
		if _, ok := saved[name]; !ok {
			t.Errorf("%s missing from a two-member checkpoint (has %v…)", name, checkpoint.Names(saved)[:3])
		}
	}

	dst := ckptEngine(t, w, tensor.CPU, 2, "cnn", "mlp")
	if err := Load(ctx, dst, two); err != nil {
		t.Fatal(err)
	}
	for m := range 2 {
		if d := ckptMaxAbsDiff(ckptLogits(t, dst, m, x, shape), ckptLogits(t, src, m, x, shape)); d != 0 {
			t.Errorf("member %d: logits differ by %g after loading", m, d)
		}
	}

	one := filepath.Join(dir, "one.safetensors")
	single := ckptEngine(t, w, tensor.CPU, 4, "cnn")
	if err := Save(ctx, single, one); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		archs []string
		path  string
		want  string // "" = loads
	}{
		{"bare names into every member", []string{"cnn", "cnn"}, one, ""},
		{"two members into one", []string{"cnn"}, two, "the file holds members 0, 1, the run has 1 member(s)"},
		{"two members into three", []string{"cnn", "mlp", "cnn"}, two, "the run has 3"},
		{"members swapped", []string{"mlp", "cnn"}, two, "member 0 (mlp): checkpoint does not match the model"},
		{"bare cnn into mlp", []string{"mlp"}, one, "missing: fc1.bias"},
		{"missing file", []string{"cnn"}, filepath.Join(dir, "nope.safetensors"), "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := ckptEngine(t, w, tensor.CPU, 5, tc.archs...)
			err := Load(ctx, e, tc.path)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
					t.Fatalf("error %v, want one naming %s and containing %q", err, tc.path, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := ckptLogits(t, single, 0, x, shape)
			for m := range tc.archs {
				if d := ckptMaxAbsDiff(ckptLogits(t, e, m, x, shape), want); d != 0 {
					t.Errorf("member %d: logits differ by %g", m, d)
				}
			}
		})
	}
}

// TestPyTorchInterop checks that the PyTorch twin of bench/torch_models.py
// loads an exported checkpoint with strict load_state_dict and computes the
// same eval-mode logits.
func TestPyTorchInterop(t *testing.T) {
	python, script := torchTwin(t)
	w := tensor.NewWorker(2)
	defer w.Close()
	ctx := context.Background()
	for _, arch := range []string{"cnn", "resnet10"} {
		t.Run(arch, func(t *testing.T) {
			e := ckptEngine(t, w, tensor.CPU, 11, arch)
			ckptTrainStep(t, e)
			dir := t.TempDir()
			ckpt := filepath.Join(dir, arch+".safetensors")
			if err := Save(ctx, e, ckpt); err != nil {
				t.Fatal(err)
			}
			x, shape := ckptInput(6, 13)
			lg := ckptLogits(t, e, 0, x, shape)
			io := filepath.Join(dir, "io.safetensors")
			if err := checkpoint.Write(io, []checkpoint.Tensor{
				checkpoint.NewF32("input", shape, x),
				checkpoint.NewF32("logits", []int64{shape[0], 10}, lg),
			}, nil); err != nil {
				t.Fatal(err)
			}
			diff, scale := ckptTorchCompare(t, python, script, ckpt, arch, io)
			t.Logf("%s: max |Δlogit| %.3g (max |logit| %.3g)", arch, diff, scale)
			if tol := 1e-4 * max(1, scale); diff > tol || math.IsNaN(diff) {
				t.Errorf("PyTorch's logits differ by %g (> %g)", diff, tol)
			}

			// Negative control: another engine's weights must not match.
			other := ckptEngine(t, w, tensor.CPU, 12, arch)
			otherCkpt := filepath.Join(dir, "other.safetensors")
			if err := Save(ctx, other, otherCkpt); err != nil {
				t.Fatal(err)
			}
			if d, _ := ckptTorchCompare(t, python, script, otherCkpt, arch, io); d < 1e-3 {
				t.Errorf("another model's checkpoint matches the logits too (Δ %g): the comparison is blind", d)
			}
		})
	}
}

// torchTwin returns Debian's python3 and the PyTorch twin of the model
// zoo (bench/torch_models.py), skipping the test when that python has no
// torch (make test installs python3-torch).
func torchTwin(t *testing.T) (python, script string) {
	t.Helper()
	return torchtwin.Python, torchtwin.Script(t)
}

// ckptTorchCompare runs the PyTorch twin on a checkpoint and an input/logits
// file and returns the largest logit difference and the largest logit.
func ckptTorchCompare(t *testing.T, python, script, ckpt, arch, io string) (diff, scale float64) {
	t.Helper()
	out, err := exec.Command(python, script, "--compare", ckpt, "--arch", arch, "--io", io).CombinedOutput()
	if err != nil {
		t.Fatalf("%s --compare: %v\n%s", script, err, out)
	}
	if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "max_abs_diff %g max_abs_logit %g", &diff, &scale); err != nil {
		t.Fatalf("unexpected output %q: %v", out, err)
	}
	return diff, scale
}

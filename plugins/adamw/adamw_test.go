package adamw_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/optlab/optlab/internal/torchtwin"
	"github.com/optlab/optlab/plugins/adamw"
	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// quadratic is the problem of the reference tests: L(θ) = ½θᵀAθ − bᵀθ, a
// gradient Aθ − b that PyTorch computes the same way.
func quadratic() *optimtest.Quadratic {
	return &optimtest.Quadratic{
		A:  [][]float64{{2, 0.5, 0}, {0.5, 1, -0.25}, {0, -0.25, 0.5}},
		B:  []float64{1, 0, -0.5},
		X0: []float64{1, -2, 0.5},
	}
}

// reference is torch.optim.AdamW in float64, alone or as SAM's base
// optimizer (davda54/sam: e = ρ·g/(‖g‖+1e-12), the gradient at θ+e, θ
// restored, the base step), on quadratic's gradient: it prints θ after
// every step.
const reference = `
import sys, torch
torch.set_default_dtype(torch.float64)
mode, steps, lr, wd, rho = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
A = torch.tensor([[2, 0.5, 0], [0.5, 1, -0.25], [0, -0.25, 0.5]])
b = torch.tensor([1, 0, -0.5])
p = torch.nn.Parameter(torch.tensor([1, -2, 0.5]))
opt = torch.optim.AdamW([p], lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=wd)
grad = lambda x: A @ x - b
for _ in range(steps):
    with torch.no_grad():
        g = grad(p)
        if mode == "sam":
            e = rho * g / (g.norm() + 1e-12)
            g = grad(p + e)
    p.grad = g.clone()
    opt.step()
    print(" ".join(repr(v) for v in p.detach().tolist()))
`

// torchTrajectory runs the reference and returns θ after every step.
func torchTrajectory(t *testing.T, mode string, steps int, lr, wd, rho float64) [][]float64 {
	t.Helper()
	torchtwin.Script(t) // skips without Debian's python3-torch
	script := filepath.Join(t.TempDir(), "adamw_reference.py")
	if err := os.WriteFile(script, []byte(reference), 0o644); err != nil {
		t.Fatal(err)
	}
	out := torchtwin.Exec(t, script, mode, strconv.Itoa(steps), fmt.Sprint(lr), fmt.Sprint(wd), fmt.Sprint(rho))
	var traj [][]float64
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var row []float64
		for _, f := range strings.Fields(line) {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatalf("reference output %q: %v", line, err)
			}
			row = append(row, v)
		}
		traj = append(traj, row)
	}
	if len(traj) != steps {
		t.Fatalf("reference printed %d steps, want %d:\n%s", len(traj), steps, out)
	}
	return traj
}

// The adamw plugin, and SAM with update = "adamw", follow
// torch.optim.AdamW in float64 (alone, and as davda54's SAM's base
// optimizer) step for step over 25 steps, to 1e-12 relative: on the exact
// host both compute in float64, so any difference in the formula (the
// order of the decay and the moments, the bias corrections, where ε goes)
// would show far above that.
func TestFollowsTorchAdamW(t *testing.T) {
	const steps, lr, wd, rho = 25, 0.05, 0.1, 0.05
	tests := []struct {
		mode   string
		opt    func() optim.Optimizer
		params map[string]any
	}{
		{"adamw", adamw.New, map[string]any{"weight_decay": wd}},
		{"sam", builtinNew("sam"), map[string]any{"rho": rho, "update": "adamw", "adamw_weight_decay": wd}},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			want := torchTrajectory(t, tt.mode, steps, lr, wd, rho)
			h := optimtest.MustHost(t, quadratic())
			worst := 0.0
			optimtest.MustRun(t, tt.opt(), h, steps, optimtest.WithLR(lr), optimtest.WithHParams(tt.params),
				optimtest.WithAfterStep(func(in optim.StepInput, _ optim.StepOutput) error {
					for i, v := range h.Params(0) {
						w := want[in.Step][i]
						d := math.Abs(v-w) / math.Max(math.Abs(w), 1e-3)
						worst = max(worst, d)
						if d > 1e-12 {
							return fmt.Errorf("step %d θ[%d] = %.17g, torch %.17g (relative %.2g)", in.Step, i, v, w, d)
						}
					}
					return nil
				}))
			t.Logf("largest relative difference to torch over %d steps: %.2g", steps, worst)
		})
	}
}

// builtinNew returns the constructor of the built-in method name (with
// its update rules).
func builtinNew(name string) func() optim.Optimizer {
	return func() optim.Optimizer {
		opt, err := builtin.Registry().New(name)
		if err != nil {
			panic(err)
		}
		return opt
	}
}

// A run resumed from the state saved mid-run (the moments, restored by
// the host, and the step count) ends where the uninterrupted one does,
// bitwise, for the plugin and for SAM-AdamW.
func TestResumeBitwise(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		new    func() optim.Optimizer
		params map[string]any
	}{
		{"adamw", adamw.New, nil},
		{"sam-adamw", builtinNew("sam"), map[string]any{"update": "adamw"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []optimtest.RunOption{optimtest.WithLR(0.05), optimtest.WithHParams(tc.params), optimtest.WithTotalSteps(10)}
			straight := optimtest.MustHost(t, quadratic())
			optimtest.MustRun(t, tc.new(), straight, 10, opts...)

			first := optimtest.MustHost(t, quadratic())
			a := tc.new()
			optimtest.MustRun(t, a, first, 4, opts...)
			blob, vecs, err := a.SaveState(ctx)
			if err != nil || len(vecs) != 2 {
				t.Fatalf("state: %d vectors, %v; want the two moments", len(vecs), err)
			}
			second := optimtest.MustHost(t, quadratic(), optimtest.WithParams(0, first.Params(0)))
			b := tc.new()
			r := optimtest.NewHarness(b, second, append(opts, optimtest.WithStartStep(4))...)
			if err := r.Configure(ctx, 10); err != nil {
				t.Fatal(err)
			}
			for _, v := range vecs {
				data, err := first.Vec(v)
				if err != nil {
					t.Fatal(err)
				}
				if err := second.SetVec(v, data); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.LoadState(ctx, blob); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Run(ctx, 6); err != nil {
				t.Fatal(err)
			}
			if got, want := second.Params(0), straight.Params(0); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("resumed %v, uninterrupted %v", got, want)
			}
		})
	}
}

// The rule's ops: weight decay, the moments, the bias-corrected step; one
// Exec per step with nothing read back (golden trace, two members).
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update,
		optimtest.TraceCase{Golden: "testdata/trace.golden", New: adamw.New, Members: 2},
		optimtest.TraceCase{Golden: "testdata/trace_sam_adamw.golden", New: builtinNew("sam"), Members: 1,
			Params: map[string]any{"update": "adamw"}})
}

func TestOwnsUpdate(t *testing.T) {
	info := builtinNew("sam")().Info()
	for _, tc := range []struct {
		params map[string]any
		owns   bool
	}{{map[string]any{"update": "base"}, false}, {map[string]any{"update": "adamw"}, true}, {nil, false}} {
		if got := info.OwnsUpdateWith(tc.params); got != tc.owns {
			t.Errorf("sam with %v owns its update: %v, want %v", tc.params, got, tc.owns)
		}
	}
	if !adamw.New().Info().OwnsUpdateWith(nil) {
		t.Error("the adamw plugin does not own its update")
	}
}

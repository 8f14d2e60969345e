package train

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/sdk/optim"
)

// counted wraps an optimizer and reads the real engine's counters when
// each step begins and ends: during(i) is what step i did (Execs, blocking
// reads, host→device copies); between two step beginnings also lie the
// loop's reading of the step before and the next batch's feed.
type counted struct {
	optim.Optimizer
	h          optim.Host
	begin, end []engine.Counters
}

func (c *counted) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	c.h = h
	return c.Optimizer.Configure(ctx, h, cfg)
}

func (c *counted) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	e, ok := c.h.(*engine.Engine)
	if !ok {
		return optim.StepOutput{}, fmt.Errorf("the host is a %T, not the engine", c.h)
	}
	c.begin = append(c.begin, e.Counters())
	out, err := c.Optimizer.Step(ctx, in)
	c.end = append(c.end, e.Counters())
	return out, err
}

// during returns the counters' growth during step i.
func (c *counted) during(i int) engine.Counters {
	b, e := c.begin[i], c.end[i]
	return engine.Counters{Execs: e.Execs - b.Execs, Ops: e.Ops - b.Ops, BlockingReads: e.BlockingReads - b.BlockingReads,
		HostToDevice: e.HostToDevice - b.HostToDevice}
}

// Every built-in method steps in one Exec with no blocking device→host
// read in steady state (after its first step), through the real engine and
// the training loop, which reads the reported metrics without blocking on
// the CPU.
func TestOneExecNoBlockingReadPerStep(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	short := strings.NewReplacer("epochs = 3", "epochs = 1\nmax_steps = 6").Replace(digitsTOML)
	two := strings.Replace(short, `archs = ["cnn"]`, `archs = ["cnn*2"]`, 1)
	vi := strings.Replace(short, "[train]", "variational = true\n[train]", 1)
	reg := builtin.Registry()
	// Steps known to take a second Exec: a snapshot ensemble's snapshots
	// (plugins/ensembles: CopyState in a program of its own).
	extra := map[string][]int{"snapshot ensemble": {2, 5}}
	// Methods that branch on the device (the If op): on a GPU each If
	// reads its condition, one blocking read per member and step (on the
	// CPU none).
	ifs := map[string]int64{"aesam": 1, "aesam ensemble": 2}
	for _, c := range []struct {
		name, method, toml string
		params             map[string]any
	}{
		{"sgd", "sgd", short, nil},
		{"sam", "sam", short, map[string]any{"rho": 0.05}},
		{"sam m=2", "sam", short, map[string]any{"rho": 0.05, "m": int64(2)}},
		{"asam weights", "sam", short, map[string]any{"rho": 0.5, "adaptive": true, "adaptive_scope": "weights"}},
		{"looksam", "looksam", short, map[string]any{"k": int64(2)}},
		{"aesam", "aesam", short, map[string]any{"delta": 0.5, "c_start": 0.0, "c_end": 0.0}},
		{"aesam ensemble", "aesam", two, nil},
		{"fsam", "fsam", short, nil},
		{"wsam", "wsam", short, map[string]any{"decouple": false, "max_norm": 1.0}},
		{"gsam ensemble", "gsam", two, map[string]any{"lr_max": 0.1}},
		{"looksam over adamw", "looksam", short, map[string]any{"k": int64(2), "update": "adamw"}},
		{"aesam over soap ensemble", "aesam", two, map[string]any{"update": "soap", "soap_precondition_frequency": int64(2)}},
		{"bsam", "bsam", short, nil},
		{"muon", "muon", short, nil},
		{"muon ensemble", "muon", two, map[string]any{"weight_decay": 0.01}},
		{"shampoo", "shampoo", short, map[string]any{"precondition_frequency": int64(2)}},
		{"sam over shampoo ensemble", "sam", two, map[string]any{"update": "shampoo"}},
		{"soap", "soap", short, map[string]any{"precondition_frequency": int64(2)}},
		{"sam over soap ensemble", "sam", two, map[string]any{"update": "soap", "soap_precondition_frequency": int64(2)}},
		{"otmdr", "otmdr", short, nil},
		{"otmdr K=2", "otmdr", short, map[string]any{"particles": int64(2)}},
		{"otmdr reference", "otmdr", short, map[string]any{"mode": "reference"}},
		{"otmdr joint", "otmdr", two, map[string]any{"joint": true}},
		{"otmdr ensemble", "otmdr", two, nil},
		{"sgvb", "sgvb", vi, nil},
		{"otmdr-sgvb", "otmdr-sgvb", vi, nil},
		{"deep ensemble of sam", "ensembles", two, map[string]any{"kind": "deep", "member": "sam"}},
		{"snapshot ensemble", "ensembles", short, map[string]any{"kind": "snapshot", "cycles": int64(2)}},
		{"dst with topology updates", "dst", two, map[string]any{"update_frequency": int64(2)}},
		{"edst with topology updates", "edst", two, map[string]any{"update_frequency": int64(2)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			opt, err := reg.New(c.method)
			if err != nil {
				t.Fatal(err)
			}
			r, exp := newRunner(t, w, c.toml)
			cw := &counted{Optimizer: opt}
			runOnce(t, r, exp, cw, c.params)
			if len(cw.begin) != 6 {
				t.Fatalf("%d steps, want 6", len(cw.begin))
			}
			for i := range cw.begin {
				s := cw.during(i)
				execs := int64(1)
				if slices.Contains(extra[c.name], i) {
					execs = 2
				}
				if i > 0 && (s.Execs != execs || s.BlockingReads > ifs[c.name]) {
					t.Errorf("step %d: %d Execs (%d ops), %d blocking reads; want %d Exec, at most %d blocking reads (an If's condition on a GPU)",
						i, s.Execs, s.Ops, s.BlockingReads, execs, ifs[c.name])
				}
			}
		})
	}
}

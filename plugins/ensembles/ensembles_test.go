package ensembles_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/plugins/bsam"
	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/plugins/ensembles"
	"github.com/optlab/optlab/plugins/otmdr"
	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

func hp(params map[string]any) optimtest.RunOption { return optimtest.WithHParams(params) }

// newEnsemble returns the built-in ensembles method, with the built-in
// member optimizers.
func newEnsemble() optim.Optimizer { return ensembles.New(builtin.EnsembleOptions()) }

// snapshots returns the handles of the first n snapshots of e.
func snapshots(e optim.Optimizer, n int) []optim.Vec {
	vecs := make([]optim.Vec, n)
	for k := range vecs {
		vecs[k] = e.(*ensembles.Ensemble).Snapshot(k)
	}
	return vecs
}

// mlp has 64 samples: 4 steps per epoch with batches of 16.
func mlp() optimtest.Problem {
	return optimtest.NewMLP(optimtest.MLPConfig{Hidden: 6, Samples: 64, Seed: 2})
}

var momentum = optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9, Nesterov: true, WeightDecay: 5e-4})

func vec(t *testing.T, h *optimtest.Host, v optim.Vec) []float64 {
	t.Helper()
	d, err := h.Vec(v)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func predictive(t *testing.T, opt optim.Optimizer) optim.Predictive {
	t.Helper()
	p, err := opt.Predictive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func evaluate(t *testing.T, h *optimtest.Host, p optim.Predictive) optimtest.Eval {
	t.Helper()
	e, err := h.Evaluate(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// gradsPerStep counts member m's gradient passes in step s.
func gradsPerStep(h *optimtest.Host, s int64, m int) int {
	n := 0
	for _, g := range h.Grads() {
		if g.Step == s && g.Member == m {
			n++
		}
	}
	return n
}

// standalone returns the plugin that member names, and the ensemble's
// hyperparameters equivalent to params for it.
func standalone(member string, params map[string]any) (optim.Optimizer, map[string]any) {
	news := map[string]func() optim.Optimizer{"sgd": sgd.New, "sam": sam.New, "bsam": bsam.New, "otmdr": otmdr.New}
	ens := map[string]any{"kind": "deep", "member": member}
	for k, v := range params {
		ens[member+"_"+k] = v
	}
	return news[member](), ens
}

// memberCases are non-default settings of every member optimizer.
var memberCases = []struct {
	member string
	params map[string]any
}{
	{"sgd", nil},
	{"sam", map[string]any{"rho": 0.1, "m": 2}},
	{"bsam", map[string]any{"m": 2, "rho": 0.02, "beta2": 0.9}},
	{"otmdr", map[string]any{"particles": 2, "rho1": 0.03}},
}

func TestInfo(t *testing.T) {
	info := newEnsemble().Info()
	want := optim.Features{Members: true, MemberDataOrder: true, Predictive: true, State: true}
	if info.Name != "ensembles" || info.Features != want {
		t.Errorf("info %+v, want features %+v", info, want)
	}
	byName := map[string]optim.ParamSpec{}
	for _, s := range info.Params {
		if _, dup := byName[s.Name]; dup {
			t.Errorf("parameter %q twice", s.Name)
		}
		byName[s.Name] = s
	}
	if _, err := hparams.Resolve(info.Params, nil); err != nil {
		t.Errorf("schema does not resolve: %v", err)
	}
	plugins := map[string]optim.Optimizer{"sgd": sgd.New(), "sam": sam.New(), "bsam": bsam.New(), "otmdr": otmdr.New()}
	for name, opt := range plugins {
		for _, s := range opt.Info().Params {
			got, ok := byName[name+"_"+s.Name]
			if !ok || got.Type != s.Type || !reflect.DeepEqual(got.Default, s.Default) || !strings.Contains(got.Doc, s.Doc) {
				t.Errorf("%s_%s: %+v, want the %s plugin's %+v", name, s.Name, got, name, s)
			}
		}
	}
	for _, n := range []string{"kind", "member", "cycles", "lr_max", "pretrain_epochs", "pretrain_fraction",
		"pretrain_lr", "pretrain_schedule", "lr_1", "lr_2", "cycle"} {
		if _, ok := byName[n]; !ok {
			t.Errorf("parameter %q missing", n)
		}
	}
	if got := builtin.EnsembleOptions().Members.Names(); !slices.Equal(got, []string{"sgd", "sam", "bsam", "otmdr"}) {
		t.Errorf("members %v", got)
	}
}

// The member optimizers are those of the registry in Options, and only
// those in FollowsSetLR can be scheduled by snapshot and FGE.
func TestOptions(t *testing.T) {
	r := &optim.Registry{}
	for _, e := range []optim.Entry{{Name: "sgd", New: sgd.New}, {Name: "sam", New: sam.New}, {Name: "bsam", New: bsam.New}} {
		if err := r.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	newOpt := func() optim.Optimizer {
		return ensembles.New(ensembles.Options{Members: r})
	}
	for _, s := range newOpt().Info().Params {
		if strings.HasPrefix(s.Name, "otmdr_") {
			t.Errorf("parameter %q of an optimizer that is not a member", s.Name)
		}
	}
	tests := []struct {
		name   string
		opt    optim.Optimizer
		params map[string]any
		want   string // "" for success
	}{
		{"deep sgd", newOpt(), nil, ""},
		{"snapshot sam", newOpt(), map[string]any{"kind": "snapshot", "member": "sam", "sam_rho": 0.1}, ""},
		{"snapshot sgd", newOpt(), map[string]any{"kind": "snapshot"}, ""},
		{"snapshot bsam", newOpt(), map[string]any{"kind": "snapshot", "member": "bsam"}, "SetLR sets (sgd, sam); bsam does its own update"},
		{"not a member", newOpt(), map[string]any{"member": "otmdr"}, `member "otmdr": want one of ["sgd" "sam" "bsam"]`},
		{"no members", ensembles.New(ensembles.Options{}), nil, `member "sgd": want one of []`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
			_, err := optimtest.Run(context.Background(), tt.opt, h, 2, hp(tt.params))
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("err = %v, want containing %q", err, tt.want)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		params  map[string]any
		members int
		want    string
	}{
		{"unknown kind", map[string]any{"kind": "swa"}, 1, `"kind": "swa" is not one of "deep", "snapshot", "fge"`},
		{"unknown member", map[string]any{"member": "adam"}, 1, `member "adam"`},
		{"unknown parameter", map[string]any{"rho": 0.1}, 1, "unknown"},
		{"other member's parameter", map[string]any{"member": "sam", "otmdr_rho1": 0.1}, 1, "otmdr_rho1 = 0.1 is set but member = \"sam\""},
		{"other kind's parameter", map[string]any{"kind": "deep", "cycles": 3}, 1, `cycles = 3 is a "snapshot" parameter`},
		{"fge parameter for snapshot", map[string]any{"kind": "snapshot", "lr_1": 0.1}, 1, `"fge" parameter`},
		{"member optimizer's own check", map[string]any{"member": "sam", "sam_m": 0}, 1, `"sam_m": 0 is out of range [1,batch]: want ≥ 1`},
		{"otmdr joint", map[string]any{"member": "otmdr", "otmdr_joint": true}, 3, "joint"},
		{"snapshot with members", map[string]any{"kind": "snapshot"}, 3, "trains one member"},
		{"fge with members", map[string]any{"kind": "fge"}, 2, "trains one member"},
		{"snapshot with bsam", map[string]any{"kind": "snapshot", "member": "bsam"}, 1, "bsam does its own update"},
		{"snapshot cycles", map[string]any{"kind": "snapshot", "cycles": 0}, 1, `"cycles": 0 is out of range [1,): want ≥ 1`},
		{"snapshot lr_max", map[string]any{"kind": "snapshot", "lr_max": -0.1}, 1, `"lr_max": -0.1 is out of range [0,): want ≥ 0`},
		{"odd cycle", map[string]any{"kind": "fge", "cycle": 3}, 1, "must be even"},
		{"fge rates", map[string]any{"kind": "fge", "lr_2": -1.0}, 1, `"lr_2": -1 is out of range [0,): want ≥ 0`},
		{"pretrain fraction", map[string]any{"kind": "fge", "pretrain_fraction": 1.0}, 1, "pretrain_fraction"},
		{"pretrain epochs", map[string]any{"kind": "fge", "pretrain_epochs": -2}, 1, "pretrain_epochs"},
		{"pretrain schedule", map[string]any{"kind": "fge", "pretrain_schedule": "cosine"}, 1, "pretrain_schedule"},
		// hardening4/09: a run that takes no snapshot is refused, as SWA's
		{"fge without a snapshot", map[string]any{"kind": "fge", "pretrain_epochs": 1}, 1, "no snapshot would be taken, nothing ensembled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := optimtest.MustHost(t, mlp(), optimtest.WithMembers(tt.members), optimtest.WithBatchSize(16))
			_, err := optimtest.Run(context.Background(), newEnsemble(), h, 4, hp(tt.params))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want containing %q", err, tt.want)
			}
		})
	}
	// Values equal to the defaults of unused parameters are fine.
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
	optimtest.MustRun(t, newEnsemble(), h, 1, hp(map[string]any{"member": "sam", "otmdr_rho1": 0.05, "cycles": 5}))
}

// Deep ensemble of one member is the member optimizer's plugin, bitwise:
// same programs, same parameters, same metrics, same predictive.
func TestDeepOneMemberIsThePlugin(t *testing.T) {
	for _, tc := range memberCases {
		t.Run(tc.member, func(t *testing.T) {
			opt, params := standalone(tc.member, tc.params)
			want := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), momentum)
			wantOuts := optimtest.MustRun(t, opt, want, 6, optimtest.WithLR(0.1), hp(tc.params))
			ens := newEnsemble()
			got := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), momentum)
			gotOuts := optimtest.MustRun(t, ens, got, 6, optimtest.WithLR(0.1), hp(params))
			if !slices.Equal(got.Params(0), want.Params(0)) {
				t.Error("parameters differ from the plugin's")
			}
			if !reflect.DeepEqual(gotOuts, wantOuts) {
				t.Errorf("metrics differ: %v vs %v", gotOuts[5], wantOuts[5])
			}
			ge, we := got.Execs(), want.Execs()
			if len(ge) != len(we) {
				t.Fatalf("%d Exec calls, the plugin %d", len(ge), len(we))
			}
			for i := range ge {
				if !reflect.DeepEqual(ge[i].Program, we[i].Program) {
					t.Fatalf("Exec %d differs:\n%+v\n%+v", i, ge[i].Program, we[i].Program)
				}
			}
			wantPred := optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.Params}}
			if opt.Info().Features.Predictive {
				wantPred = predictive(t, opt)
			}
			if gotPred := predictive(t, ens); !reflect.DeepEqual(gotPred, wantPred) {
				t.Errorf("predictive %+v, want %+v", gotPred, wantPred)
			}
		})
	}
}

// Reference §8 item 34: an ensemble of M identical members (same initial
// parameters, no per-member randomness) trains every member like the single
// model and predicts like it.
func TestDeepIdenticalMembersPredictLikeOne(t *testing.T) {
	const members, steps = 3, 5
	cases := []struct {
		member string
		params map[string]any
	}{
		{"sgd", nil},
		{"sam", map[string]any{"rho": 0.1}},
		{"otmdr", map[string]any{"split": "loader", "noise_std": 0, "particles": 2}},
	}
	for _, tc := range cases {
		t.Run(tc.member, func(t *testing.T) {
			_, params := standalone(tc.member, tc.params)
			one := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), momentum)
			opts := []optimtest.HostOption{optimtest.WithBatchSize(16), momentum, optimtest.WithMembers(members)}
			for m := range members {
				opts = append(opts, optimtest.WithParams(m, one.Params(0)))
			}
			ens := optimtest.MustHost(t, mlp(), opts...)
			optimtest.MustRun(t, newEnsemble(), one, steps, optimtest.WithLR(0.1), hp(params))
			opt := newEnsemble()
			optimtest.MustRun(t, opt, ens, steps, optimtest.WithLR(0.1), hp(params))
			for m := range members {
				if !slices.Equal(ens.Params(m), one.Params(0)) {
					t.Errorf("member %d differs from the single model", m)
				}
			}
			pred := predictive(t, opt)
			want := []optim.Vec{optim.ParamsOf(0), optim.ParamsOf(1), optim.ParamsOf(2)}
			if pred.Kind != optim.Members || !slices.Equal(pred.Vecs, want) {
				t.Fatalf("predictive %+v", pred)
			}
			got, single := evaluate(t, ens, pred), evaluate(t, one, optim.Predictive{Kind: optim.Point})
			if math.Abs(got.NLL-single.NLL) > 1e-12 || got.Acc != single.Acc {
				t.Errorf("ensemble of identical members %+v, single model %+v", got, single)
			}
		})
	}
}

// Members initialized by the host with their own seeds differ, stay
// different, and their averaged probabilities score at least as well in NLL
// as the members do on average (Jensen), and here strictly better.
func TestDeepMembersDiffer(t *testing.T) {
	const members = 3
	ctx := context.Background()
	for _, member := range []string{"sgd", "sam", "otmdr"} {
		t.Run(member, func(t *testing.T) {
			h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 8, Samples: 128}), optimtest.WithMembers(members),
				optimtest.WithBatchSize(32), momentum, optimtest.WithSeed(7))
			init := [][]float64{h.Params(0), h.Params(1), h.Params(2)}
			if slices.Equal(init[0], init[1]) || slices.Equal(init[1], init[2]) {
				t.Fatal("the host initialized members identically")
			}
			opt := newEnsemble()
			outs := optimtest.MustRun(t, opt, h, 80, optimtest.WithLR(0.05), hp(map[string]any{"member": member}))
			if first, last := outs[0].Metrics["loss"], outs[len(outs)-1].Metrics["loss"]; !(last < 0.7*first) {
				t.Errorf("did not train: loss %v → %v", first, last)
			}
			var mean float64
			for m := range members {
				if slices.Equal(h.Params(m), init[m]) {
					t.Errorf("member %d did not move", m)
				}
				e, err := h.Evaluate(ctx, optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.ParamsOf(m)}})
				if err != nil {
					t.Fatal(err)
				}
				mean += e.NLL / members
			}
			if slices.Equal(h.Params(0), h.Params(1)) {
				t.Error("members 0 and 1 are equal after training")
			}
			ens := evaluate(t, h, predictive(t, opt))
			t.Logf("ensemble %+v, mean member NLL %.4f", ens, mean)
			if !(ens.NLL < mean) {
				t.Errorf("ensemble NLL %v, mean member NLL %v", ens.NLL, mean)
			}
		})
	}
}

// The member optimizer serves all members in its usual number of Exec
// calls per step (fused), and every member gets as many gradient passes as
// the single model does: M× the passes of one member per step in all.
func TestDeepExecAndGradCounts(t *testing.T) {
	const steps = 3
	for _, tc := range memberCases {
		for _, members := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/M=%d", tc.member, members), func(t *testing.T) {
				opt, params := standalone(tc.member, tc.params)
				single := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
				optimtest.MustRun(t, opt, single, steps, optimtest.WithLR(0.1), hp(tc.params))
				execs, grads := single.ExecCount(1), gradsPerStep(single, 1, 0)
				if execs < 1 || grads < 1 {
					t.Fatalf("single model: %d Exec calls and %d gradient passes per step", execs, grads)
				}
				h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), optimtest.WithMembers(members))
				optimtest.MustRun(t, newEnsemble(), h, steps, optimtest.WithLR(0.1), hp(params))
				for s := range int64(steps) {
					if n := h.ExecCount(s); n != execs {
						t.Errorf("M = %d, step %d: %d Exec calls, want %d (fused)", members, s, n, execs)
					}
					total := 0
					for m := range members {
						n := gradsPerStep(h, s, m)
						total += n
						if n != grads {
							t.Errorf("M = %d, step %d, member %d: %d gradient passes, want %d", members, s, m, n, grads)
						}
					}
					if total != members*grads {
						t.Errorf("M = %d, step %d: %d gradient passes, want M × %d", members, s, total, grads)
					}
				}
			})
		}
	}
}

// A deep bSAM ensemble gives every member its own posterior; its predictive
// averages the members' means (a mixture of Gaussians is not a Predictive).
func TestDeepBSAM(t *testing.T) {
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), optimtest.WithMembers(2))
	opt := newEnsemble()
	optimtest.MustRun(t, opt, h, 3, optimtest.WithLR(0.1), hp(map[string]any{"member": "bsam", "bsam_m": 2}))
	want := optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.ParamsOf(0), optim.ParamsOf(1)}}
	if got := predictive(t, opt); !reflect.DeepEqual(got, want) {
		t.Errorf("predictive %+v, want %+v", got, want)
	}
	b := opt.(*ensembles.Ensemble).Unwrap().(*bsam.BSAM)
	if slices.Equal(vec(t, h, b.S(0)), vec(t, h, b.S(1))) {
		t.Error("members share s")
	}
	_, vecs, err := opt.SaveState(context.Background())
	if err != nil || len(vecs) != 6 {
		t.Errorf("state vecs %v, err %v", vecs, err)
	}
}

// snapshotLR is the expected snapshot schedule, written out independently.
func snapshotLR(alpha0 float64, step, total int64, cycles int) float64 {
	tc := total / int64(cycles)
	c := min(step/tc, int64(cycles)-1)
	n := tc
	if c == int64(cycles)-1 {
		n = total - c*tc
	}
	return alpha0 / 2 * (1 + math.Cos(math.Pi*float64(step-c*tc+1)/float64(n)))
}

// record keeps the rate and parameters after every step.
type record struct {
	h      *optimtest.Host
	lr     []float64
	params [][]float64
	bn     []int // label of member 0's BatchNorm statistics after each step
	out    []optim.StepOutput
}

func (r *record) after(in optim.StepInput, out optim.StepOutput) error {
	r.lr = append(r.lr, r.h.LR(0))
	r.params = append(r.params, r.h.Params(0))
	bn, _ := r.h.BNStats(optim.Params)
	r.bn = append(r.bn, bn)
	r.out = append(r.out, out)
	return nil
}

// checkSnapshotStats fails unless snapshot k carries the BatchNorm
// statistics member 0 had after step steps[k] (all different from the
// final ones), so the predictive evaluates each snapshot as it was.
func checkSnapshotStats(t *testing.T, h *optimtest.Host, rec *record, vecs []optim.Vec, steps []int64) {
	t.Helper()
	final, _ := h.BNStats(optim.Params)
	for k, s := range steps {
		got, ok := h.BNStats(vecs[k])
		if !ok || got != rec.bn[s] || (s != int64(len(rec.bn)-1) && got == final) {
			t.Errorf("snapshot %d: BatchNorm statistics %d (ok %v), want %d of step %d (final %d)", k, got, ok, rec.bn[s], s, final)
		}
	}
}

// Snapshot ensembles: the cosine rate with restarts (reference §8 item 33),
// a snapshot at the end of every cycle (the last cycle taking the
// remainder), SGD through BaseStep at that rate (bitwise the sgd plugin
// given the same rates as its schedule), one Exec per step plus one per
// snapshot, and the predictive over the snapshots.
func TestSnapshot(t *testing.T) {
	const total, cycles, alpha0 = 42, 4, 0.2
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), momentum)
	rec := &record{h: h}
	opt := newEnsemble()
	optimtest.MustRun(t, opt, h, total, optimtest.WithLR(99), optimtest.WithAfterStep(rec.after),
		hp(map[string]any{"kind": "snapshot", "cycles": cycles, "lr_max": alpha0}))
	for s := range int64(total) {
		if want := snapshotLR(alpha0, s, total, cycles); !(math.Abs(rec.lr[s]-want) <= 1e-16) || rec.out[s].Metrics["lr"] != rec.lr[s] {
			t.Errorf("step %d: lr %.17g (metric %v), want %.17g", s, rec.lr[s], rec.out[s].Metrics["lr"], want)
		}
	}
	for _, s := range []int64{9, 19, 29, 41} {
		if rec.lr[s] != 0 {
			t.Errorf("last step %d of a cycle: lr %g, want 0", s, rec.lr[s])
		}
	}
	for _, s := range []int64{4, 14, 24, 35} { // T_cur = T_cycle/2 (the last cycle has 12 steps)
		if math.Abs(rec.lr[s]-alpha0/2) > 1e-16 {
			t.Errorf("mid-cycle step %d: lr %.17g, want α0/2", s, rec.lr[s])
		}
	}
	snapSteps := []int64{9, 19, 29, 41}
	for s := range int64(total) {
		want := 1
		if slices.Contains(snapSteps, s) {
			want = 2
		}
		if n := h.ExecCount(s); n != want {
			t.Errorf("step %d: %d Exec calls, want %d", s, n, want)
		}
	}
	pred := predictive(t, opt)
	wantVecs := snapshots(opt, 4)
	if pred.Kind != optim.Members || !slices.Equal(pred.Vecs, wantVecs) || len(slices.Compact(slices.Sorted(slices.Values(wantVecs)))) != 4 {
		t.Fatalf("predictive %+v", pred)
	}
	for k, s := range snapSteps {
		if !slices.Equal(vec(t, h, pred.Vecs[k]), rec.params[s]) {
			t.Errorf("snapshot %d differs from the parameters after step %d", k, s)
		}
	}
	checkSnapshotStats(t, h, rec, pred.Vecs, snapSteps)
	if e := evaluate(t, h, pred); e.Acc < 0.5 {
		t.Errorf("snapshot ensemble %+v", e)
	}

	// The same rates given to the sgd plugin as its schedule: bitwise equal.
	ref := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), momentum)
	optimtest.MustRun(t, sgd.New(), ref, total, optimtest.WithSchedule(func(s int64, _ int) float64 { return rec.lr[s] }))
	if !slices.Equal(ref.Params(0), h.Params(0)) {
		t.Error("snapshot ensemble's SGD differs from the sgd plugin at the same rates")
	}
}

// lr_max = 0 takes α0 from the step's scheduled rate; a run shorter than
// cycles gets one cycle per step; before any snapshot the predictive is the
// live parameters.
func TestSnapshotEdges(t *testing.T) {
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
	rec := &record{h: h}
	opt := newEnsemble()
	r := optimtest.NewHarness(opt, h, optimtest.WithLR(0.3), optimtest.WithAfterStep(rec.after),
		hp(map[string]any{"kind": "snapshot", "lr_max": 0, "cycles": 2}))
	if err := r.Configure(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	if got := predictive(t, opt); !reflect.DeepEqual(got, optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.Params}}) {
		t.Errorf("predictive before any snapshot %+v", got)
	}
	if _, err := r.Run(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	if want := 0.15 * (1 + math.Cos(math.Pi/5)); math.Abs(rec.lr[0]-want) > 1e-16 {
		t.Errorf("lr %v, want %v", rec.lr[0], want)
	}
	if _, err := r.Step(context.Background()); err == nil || !strings.Contains(err.Error(), "outside the run") {
		t.Errorf("step past the run: %v", err)
	}

	smoke := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
	opt = newEnsemble()
	optimtest.MustRun(t, opt, smoke, 2, hp(map[string]any{"kind": "snapshot"}))
	if got := predictive(t, opt); len(got.Vecs) != 2 {
		t.Errorf("2-step run with 5 cycles: predictive %+v, want 2 snapshots", got)
	}
	if _, err := newEnsemble().Predictive(context.Background()); err == nil {
		t.Error("predictive before configure")
	}
}

// fgeLR is the expected FGE schedule, written out independently: train.py's
// epoch factor (1-based epoch e of E: 1 to E/2, linear to 0.01 at 0.9E) in
// pretraining, fge.py's triangle afterwards.
func fgeLR(step, spe, pretrain int64, budget, base, a1, a2 float64, cycle int64) float64 {
	epoch, i := step/spe, step%spe
	if epoch < pretrain {
		alpha := float64(epoch+1) / budget
		switch {
		case alpha <= 0.5:
			return base
		case alpha <= 0.9:
			return base * (1 - (alpha-0.5)/0.4*0.99)
		}
		return base * 0.01
	}
	k := epoch - pretrain
	t := (float64(k%cycle) + float64(i)/float64(spe)) / float64(cycle)
	if t < 0.5 {
		return a1*(1-2*t) + a2*2*t
	}
	return a1*(2*t-1) + a2*(2-2*t)
}

// FGE: train.py's pretraining schedule, then the triangular cycle
// (reference §8 item 32), a snapshot at the end of FGE epochs 1, 5, 9, …
// (cycle 4), SGD through BaseStep at those rates (bitwise the sgd plugin
// given them as its schedule), and the predictive over the snapshots.
func TestFGE(t *testing.T) {
	const epochs, spe = 20, 4
	tests := []struct {
		name     string
		params   map[string]any
		pretrain int64
		budget   float64
		base     float64
		snaps    []int64 // steps after which a snapshot is due
	}{
		{"defaults: 80% pretraining over the budget", nil, 16, 20, 0.1, []int64{71}},
		{"pretrain_epochs, own schedule", map[string]any{"pretrain_epochs": 4, "pretrain_schedule": "pretrain", "pretrain_lr": 0.2},
			4, 4, 0.2, []int64{23, 39, 55, 71}},
		{"fraction, rate from the step", map[string]any{"pretrain_fraction": 0.3, "pretrain_lr": 0, "cycle": 2, "lr_1": 0.04, "lr_2": 0.01},
			6, 20, 0.07, []int64{27, 35, 43, 51, 59, 67, 75}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params := map[string]any{"kind": "fge"}
			for k, v := range tt.params {
				params[k] = v
			}
			c, err := hparams.Resolve(newEnsemble().Info().Params, params)
			if err != nil {
				t.Fatal(err)
			}
			a1, a2, cycle := c["lr_1"].(float64), c["lr_2"].(float64), c["cycle"].(int64)
			h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), momentum)
			rec := &record{h: h}
			opt := newEnsemble()
			optimtest.MustRun(t, opt, h, epochs*spe, optimtest.WithLR(0.07), optimtest.WithAfterStep(rec.after), hp(params))
			for s := range int64(epochs * spe) {
				want := fgeLR(s, spe, tt.pretrain, tt.budget, tt.base, a1, a2, cycle)
				if math.Abs(rec.lr[s]-want) > 1e-16 {
					t.Errorf("step %d: lr %.17g, want %.17g", s, rec.lr[s], want)
				}
				n := 1
				if slices.Contains(tt.snaps, s) {
					n = 2
				}
				if got := h.ExecCount(s); got != n {
					t.Errorf("step %d: %d Exec calls, want %d", s, got, n)
				}
			}
			pred := predictive(t, opt)
			if pred.Kind != optim.Members || len(pred.Vecs) != len(tt.snaps) {
				t.Fatalf("predictive %+v, want %d snapshots", pred, len(tt.snaps))
			}
			for k, s := range tt.snaps {
				if pred.Vecs[k] != snapshots(opt, k+1)[k] || !slices.Equal(vec(t, h, pred.Vecs[k]), rec.params[s]) {
					t.Errorf("snapshot %d (%v) differs from the parameters after step %d", k, pred.Vecs[k], s)
				}
				// Taken at the end of an epoch when the rate is about to reach α2.
				if s%spe != spe-1 || math.Abs(rec.lr[s]-(a2+(a1-a2)*2/float64(spe*cycle))) > 1e-15 {
					t.Errorf("snapshot %d after step %d at lr %v", k, s, rec.lr[s])
				}
			}
			checkSnapshotStats(t, h, rec, pred.Vecs, tt.snaps)
			ref := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), momentum)
			optimtest.MustRun(t, sgd.New(), ref, epochs*spe, optimtest.WithSchedule(func(s int64, _ int) float64 { return rec.lr[s] }))
			if !slices.Equal(ref.Params(0), h.Params(0)) {
				t.Error("FGE's SGD differs from the sgd plugin at the same rates")
			}
		})
	}
}

// Resolved reports fge's pretrain_epochs for -1 (floor(pretrain_fraction ×
// run epochs)) and what the member optimizer resolved, prefixed; nothing
// for a kind that does not use pretrain_epochs, or when all was given.
func TestResolved(t *testing.T) {
	const epochs, spe = 20, 4
	otmdrAuto := map[string]any{"otmdr_rho2": 0.2, "otmdr_noise_std": 0.0, "otmdr_particle_reduction": "mean", "otmdr_split": "random"}
	fgeOTMDR := maps.Clone(otmdrAuto)
	fgeOTMDR["pretrain_epochs"] = int64(16)
	tests := []struct {
		name   string
		params map[string]any
		want   map[string]any
	}{
		{"fge", map[string]any{"kind": "fge"}, map[string]any{"pretrain_epochs": int64(16)}},
		{"fge, fraction", map[string]any{"kind": "fge", "pretrain_fraction": 0.3}, map[string]any{"pretrain_epochs": int64(6)}},
		{"fge, epochs given", map[string]any{"kind": "fge", "pretrain_epochs": 4}, nil},
		{"deep", map[string]any{"kind": "deep"}, nil},
		{"deep otmdr", map[string]any{"kind": "deep", "member": "otmdr", "otmdr_rho1": 0.1}, otmdrAuto},
		{"fge otmdr", map[string]any{"kind": "fge", "member": "otmdr", "otmdr_rho1": 0.1}, fgeOTMDR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt := newEnsemble()
			if got := opt.Resolved(); got != nil {
				t.Errorf("Resolved before Configure = %v", got)
			}
			h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
			if err := optimtest.NewHarness(opt, h, hp(tt.params)).Configure(context.Background(), epochs*spe); err != nil {
				t.Fatal(err)
			}
			if got := opt.Resolved(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Resolved = %#v, want %#v", got, tt.want)
			}
		})
	}
}

// Snapshot and FGE with SAM and OT-MDR as the member optimizer: the rate
// set in front of the first program holds for the step's BaseStep.
func TestScheduledMemberOptimizers(t *testing.T) {
	for _, member := range []string{"sam", "otmdr"} {
		t.Run(member, func(t *testing.T) {
			h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
			rec := &record{h: h}
			optimtest.MustRun(t, newEnsemble(), h, 12, optimtest.WithLR(5), optimtest.WithAfterStep(rec.after),
				hp(map[string]any{"kind": "snapshot", "member": member, "cycles": 3}))
			for s := range int64(12) {
				if want := snapshotLR(0.2, s, 12, 3); math.Abs(rec.lr[s]-want) > 1e-16 {
					t.Errorf("step %d: lr %v, want %v", s, rec.lr[s], want)
				}
			}
			for s := range int64(12) {
				var progs []optim.Program
				for _, e := range h.Execs() {
					if e.Step == s {
						progs = append(progs, e.Program)
					}
				}
				if len(progs) < 1 || !reflect.DeepEqual(progs[0].Ops[0], optim.SetLR{Member: 0, LR: rec.lr[s]}) {
					t.Fatalf("step %d: programs %+v, want the first to start with SetLR", s, progs)
				}
				for i, p := range progs {
					for j, op := range p.Ops {
						if _, ok := op.(optim.SetLR); ok && (i > 0 || j > 0) {
							t.Errorf("step %d: SetLR at op %d of program %d", s, j, i)
						}
					}
				}
			}
		})
	}
}

// A run cut in two by SaveState, a fresh Configure on a fresh host, the
// host's restore of the saved vectors and LoadState ends bitwise where the
// uninterrupted run does: parameters, snapshots and predictive.
func TestResume(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		params map[string]any
		total  int
		cut    int
	}{
		{"snapshot", map[string]any{"kind": "snapshot", "cycles": 4}, 42, 25},
		{"fge with otmdr", map[string]any{"kind": "fge", "member": "otmdr", "pretrain_epochs": 2}, 48, 29},
		{"deep otmdr", map[string]any{"member": "otmdr", "otmdr_particles": 2}, 8, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lr := optimtest.WithLR(0.1)
			straight := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
			full := newEnsemble()
			optimtest.MustRun(t, full, straight, tt.total, lr, hp(tt.params))

			first := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
			a := newEnsemble()
			optimtest.MustRun(t, a, first, tt.cut, lr, hp(tt.params), optimtest.WithTotalSteps(int64(tt.total)))
			blob, vecs, err := a.SaveState(ctx)
			if err != nil {
				t.Fatal(err)
			}
			h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), optimtest.WithParams(0, first.Params(0)))
			b := newEnsemble()
			r := optimtest.NewHarness(b, h, lr, hp(tt.params), optimtest.WithStartStep(int64(tt.cut)))
			if err := r.Configure(ctx, int64(tt.total)); err != nil {
				t.Fatal(err)
			}
			for _, v := range vecs {
				if err := h.SetVec(v, vec(t, first, v)); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.LoadState(ctx, blob); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Run(ctx, tt.total-tt.cut); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(h.Params(0), straight.Params(0)) {
				t.Error("resumed parameters differ from the uninterrupted run")
			}
			pb, pf := predictive(t, b), predictive(t, full)
			if !reflect.DeepEqual(pb, pf) {
				t.Fatalf("resumed predictive %+v, uninterrupted %+v", pb, pf)
			}
			for _, v := range pb.Vecs {
				if !slices.Equal(vec(t, h, v), vec(t, straight, v)) {
					t.Errorf("vector %d differs after the resume", v)
				}
			}
		})
	}
}

func TestLoadStateErrors(t *testing.T) {
	ctx := context.Background()
	if err := newEnsemble().LoadState(ctx, nil); err == nil {
		t.Error("load state before configure")
	}
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
	opt := newEnsemble()
	optimtest.MustRun(t, opt, h, 10, hp(map[string]any{"kind": "snapshot", "cycles": 2}))
	tests := []struct{ blob, want string }{
		{`{"version":2}`, "version"},
		{`{"version":1,"kind":"fge","member":"sgd"}`, "saved by kind"},
		{`{"version":1,"kind":"snapshot","member":"sgd","taken":[0,2]}`, "do not fit"},
		{`{"version":1,"kind":"snapshot","member":"sgd","taken":[1,1]}`, "do not fit"},
		{`{"version":1,"kind":"snapshot","member":"sgd","inner":"eA=="}`, "sgd: unexpected"},
		{`not json`, "load state"},
	}
	for _, tt := range tests {
		if err := opt.LoadState(ctx, []byte(tt.blob)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("LoadState(%s) = %v, want containing %q", tt.blob, err, tt.want)
		}
	}
}

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and the steps send in each
// kind: the golden files document the algorithm, with the member
// optimizer's handles inside the ensemble's namespace.
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update,
		// Two sgd members, each its own model: sgd's own programs (and
		// numbers: see plugins/sgd/testdata/trace.golden).
		optimtest.TraceCase{Golden: "testdata/trace_deep.golden", New: newEnsemble, Members: 2},
		// Two cycles of two steps: a snapshot after the second step of each.
		optimtest.TraceCase{Golden: "testdata/trace_snapshot.golden", New: newEnsemble, Steps: 4,
			Params: map[string]any{"kind": "snapshot", "cycles": 2}},
		// Four steps per epoch, no pretraining, cycles of two epochs: a
		// snapshot at the end of the first epoch.
		optimtest.TraceCase{Golden: "testdata/trace_fge.golden", New: newEnsemble, Steps: 4,
			Params: map[string]any{"kind": "fge", "pretrain_epochs": 0, "cycle": 2}})
}

package optimtest_test

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

// jointMLP is a small tanh MLP for JointGrad tests.
func jointMLP() *optimtest.MLP {
	return optimtest.NewMLP(optimtest.MLPConfig{Inputs: 3, Hidden: 4, Classes: 4, Samples: 48, Seed: 5})
}

// jointHost has three members with distinct initial parameters, moved off
// the init (zero biases) and allocated output vectors 1..3.
func jointHost(t *testing.T) *optimtest.Host {
	t.Helper()
	h := optimtest.MustHost(t, jointMLP(), optimtest.WithMembers(3), optimtest.WithBatchSize(16))
	for m := range 3 {
		theta := h.Params(m)
		for i := range theta {
			theta[i] += 0.3 * math.Sin(float64(7*m+i+1))
		}
		if err := h.SetVec(optim.ParamsOf(m), theta); err != nil {
			t.Fatal(err)
		}
	}
	exec(t, h, optim.Prog().Alloc(1, 0).Alloc(2, 1).Alloc(3, 2))
	h.BeginStep(optim.StepInput{Step: 0})
	return h
}

var jointAts = []optim.Vec{optim.ParamsOf(0), optim.ParamsOf(1), optim.ParamsOf(2)}

// The loss and accuracy are those of the averaged probabilities, and every
// member's gradient matches central finite differences of the joint loss.
func TestJointGradFiniteDifference(t *testing.T) {
	for _, b := range []optim.Batch{{}, {Part: 1, Of: 2, Shuffle: 9}} {
		h := jointHost(t)
		p := optim.Prog()
		ev := p.JointGrad([]optim.Vec{1, 2, 3}, jointAts, b, optim.BNUpdate)
		r := exec(t, h, p)
		recs := h.Grads()
		if len(recs) != 3 {
			t.Fatalf("%d records, want one per member", len(recs))
		}
		mlp := jointMLP()
		probs := make([][]float64, 3)
		var loss, acc float64
		for _, s := range recs[0].Samples {
			avg := make([]float64, mlp.Classes())
			for m := range probs {
				probs[m] = make([]float64, mlp.Classes())
				mlp.TrainProbs(h.Params(m), s, probs[m])
				for c := range avg {
					avg[c] += probs[m][c] / 3
				}
			}
			loss -= math.Log(avg[mlp.TrainLabel(s)]) / float64(len(recs[0].Samples))
			if slices.Index(avg, slices.Max(avg)) == mlp.TrainLabel(s) {
				acc += 1 / float64(len(recs[0].Samples))
			}
		}
		if math.Abs(r.Get(ev.Loss)-loss) > 1e-14 || math.Abs(r.Get(ev.Acc)-acc) > 1e-14 || len(r.Reads) != 2 {
			t.Errorf("batch %+v: scalars %v, want loss %v, acc %v", b, r.Reads, loss, acc)
		}
		lossAt := func(m int, theta []float64) float64 {
			t.Helper()
			old := h.Params(m)
			if err := h.SetVec(optim.ParamsOf(m), theta); err != nil {
				t.Fatal(err)
			}
			p := optim.Prog()
			ev := p.JointGrad(nil, jointAts, b, optim.BNFreeze)
			l := exec(t, h, p).Get(ev.Loss)
			if err := h.SetVec(optim.ParamsOf(m), old); err != nil {
				t.Fatal(err)
			}
			return l
		}
		const eps = 1e-6
		for m := range 3 {
			g := vec(t, h, optim.Vec(m+1))
			if !slices.Equal(g, recs[m].Grad) || recs[m].Member != m {
				t.Fatalf("member %d: output and record disagree", m)
			}
			theta := h.Params(m)
			for i := range theta {
				x := theta[i]
				theta[i] = x + eps
				lp := lossAt(m, theta)
				theta[i] = x - eps
				lm := lossAt(m, theta)
				theta[i] = x
				if fd := (lp - lm) / (2 * eps); math.Abs(fd-g[i]) > 1e-7*max(1, math.Abs(fd)) {
					t.Errorf("batch %+v member %d: ∂L/∂θ[%d] = %.10g, finite difference %.10g", b, m, i, g[i], fd)
				}
			}
		}
	}
}

// One member: JointGrad is Grad bitwise (p̄ = p and the member's share of
// the label's probability is exactly 1). M identical members: the loss is
// one member's and each gets 1/M of its gradient.
func TestJointGradReducesToGrad(t *testing.T) {
	h := jointHost(t)
	b := optim.Batch{Part: 0, Of: 2, Shuffle: 3}
	pg, pj := optim.Prog(), optim.Prog()
	pg.Grad(1, optim.ParamsOf(1), b, optim.BNUpdate)
	pj.JointGrad([]optim.Vec{2}, []optim.Vec{optim.ParamsOf(1)}, b, optim.BNUpdate)
	rg, rj := exec(t, h, pg), exec(t, h, pj)
	if !slices.Equal(rg.Reads, rj.Reads) || !slices.Equal(vec(t, h, 1), vec(t, h, 2)) {
		t.Errorf("one member: Grad %v, JointGrad %v", rg.Reads, rj.Reads)
	}

	for _, members := range []int{2, 3, 5} {
		theta := h.Params(0)
		opts := []optimtest.HostOption{optimtest.WithMembers(members), optimtest.WithBatchSize(16)}
		ats, outs := make([]optim.Vec, members), make([]optim.Vec, members)
		for m := range members {
			opts = append(opts, optimtest.WithParams(m, theta))
			ats[m], outs[m] = optim.ParamsOf(m), optim.Vec(m+1)
		}
		hm := optimtest.MustHost(t, jointMLP(), opts...)
		p := optim.Prog()
		for m := range members {
			p.Alloc(outs[m], m)
		}
		exec(t, hm, p)
		hm.BeginStep(optim.StepInput{Step: 0})
		p1, pm := optim.Prog(), optim.Prog()
		ev1, evm := p1.Grad(outs[0], ats[0], optim.Batch{}, optim.BNUpdate), pm.JointGrad(outs, ats, optim.Batch{}, optim.BNUpdate)
		one := exec(t, hm, p1)
		g := vec(t, hm, outs[0])
		joint := exec(t, hm, pm)
		if math.Abs(joint.Get(evm.Loss)-one.Get(ev1.Loss)) > 1e-15 || joint.Get(evm.Acc) != one.Get(ev1.Acc) {
			t.Errorf("M = %d: joint loss, acc %v, single member %v", members, joint.Reads, one.Reads)
		}
		for m := range members {
			gm := vec(t, hm, outs[m])
			for i := range gm {
				if want := g[i] / float64(members); math.Abs(gm[i]-want) > 1e-15 {
					t.Fatalf("M = %d member %d: ∂L/∂θ[%d] = %v, want g/M = %v", members, m, i, gm[i], want)
				}
			}
		}
	}
}

// Records: one GradRecord per member with Joint set, BatchNorm counted per
// member, Outs = 0 writes nothing, and the recorded program is a copy.
func TestJointGradRecords(t *testing.T) {
	h := jointHost(t)
	outs, ats := []optim.Vec{0, 3}, []optim.Vec{optim.ParamsOf(2), optim.ParamsOf(0)}
	p := optim.Prog()
	p.JointGrad(outs, ats, optim.Batch{}, optim.BNFreeze)
	p.JointGrad([]optim.Vec{1, 2, 3}, jointAts, optim.Batch{}, optim.BNUpdate)
	exec(t, h, optim.Prog().Fill(1, optim.K(7)))
	exec(t, h, p)
	outs[0], ats[0] = 99, 99 // mutating the caller's program must not change the record
	jg, ok := h.Execs()[2].Program.Ops[0].(optim.JointGrad)
	if !ok || !slices.Equal(jg.Outs, []optim.Vec{0, 3}) || jg.Ats[0] != optim.ParamsOf(2) {
		t.Errorf("recorded program was aliased: %#v", h.Execs()[2].Program.Ops[0])
	}
	recs := h.Grads()
	if len(recs) != 5 {
		t.Fatalf("%d records", len(recs))
	}
	for i, want := range []struct{ member, joint int }{{2, 2}, {0, 2}, {0, 3}, {1, 3}, {2, 3}} {
		if r := recs[i]; r.Member != want.member || r.Joint != want.joint || r.Step != 0 || len(r.Samples) != 16 {
			t.Errorf("record %d: member %d joint %d step %d, want member %d joint %d", i, r.Member, r.Joint, r.Step, want.member, want.joint)
		}
	}
	if recs[0].Loss != recs[1].Loss || recs[0].BN != optim.BNFreeze || !slices.Equal(recs[1].At, h.Params(0)) {
		t.Errorf("records of one pass disagree: %+v", recs[:2])
	}
	if !slices.Equal(recs[2].Grad, vec(t, h, 1)) {
		t.Error("Outs[0] = 0 of the first pass wrote a vector, or the second pass did not")
	}
	for m, want := range []optimtest.MemberStats{{BNUpdate: 1, BNFreeze: 1}, {BNUpdate: 1}, {BNUpdate: 1, BNFreeze: 1}} {
		if st := h.Stats(m); st != want {
			t.Errorf("member %d: %+v, want %+v", m, st, want)
		}
	}
}

// A JointGrad that fails counts no BatchNorm pass and records no gradient,
// also when it fails late (the errors themselves are in the conformance
// suite, but for the problem that is no SampleClassifier).
func TestJointGradErrors(t *testing.T) {
	tests := []struct {
		name string
		op   optim.JointGrad
		host func(t *testing.T) *optimtest.Host
		want string
	}{
		{"same member twice", optim.JointGrad{Outs: []optim.Vec{0, 0}, Ats: []optim.Vec{optim.ParamsOf(1), 2}}, nil, "both belong to member 1"},
		{"unallocated out", optim.JointGrad{Outs: []optim.Vec{1, 9}, Ats: jointAts[:2]}, nil, "not allocated"},
		{"BN mode", optim.JointGrad{Outs: []optim.Vec{0}, Ats: jointAts[:1], BN: 7}, nil, "unknown BN mode"},
		{"batch part", optim.JointGrad{Outs: []optim.Vec{0}, Ats: jointAts[:1], Batch: optim.Batch{Part: 2, Of: 2}}, nil, "batch part 2 of 2"},
		{"not a classifier", optim.JointGrad{Outs: []optim.Vec{0}, Ats: jointAts[:1]}, func(t *testing.T) *optimtest.Host {
			return optimtest.MustHost(t, &optimtest.Linear{C: []float64{1}})
		}, "not a SampleClassifier"},
		{"variational member", optim.JointGrad{Outs: []optim.Vec{0, 0}, Ats: jointAts[:2]}, func(t *testing.T) *optimtest.Host {
			return optimtest.MustHost(t, jointMLP(), optimtest.WithMembers(2), optimtest.WithVariational(1, nil, 1, 1, ""))
		}, "member 1, which is variational"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h *optimtest.Host
			if tt.host != nil {
				h = tt.host(t)
			} else {
				h = jointHost(t)
			}
			before := h.Stats(0)
			_, err := h.Exec(context.Background(), &optim.Program{Ops: []optim.Op{tt.op}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
			if h.Stats(0) != before || len(h.Grads()) != 0 {
				t.Error("a failed JointGrad counted a pass or recorded a gradient")
			}
		})
	}
}

// p̄ is clamped at 1e-40 before the log, as on the real host: samples whose
// label has probability 0 add −log 1e-40 to the loss and nothing to the
// gradient, which stays finite.
func TestJointGradClamp(t *testing.T) {
	p := optimtest.NewMLP(optimtest.MLPConfig{Samples: 12, Seed: 1}) // softmax regression, 3 classes
	theta := make([]float64, p.Numel())
	theta[p.Numel()-3] = -1e4 // bias of class 0: p₀ = 0 in float64, so p̄₀ = 0 too
	h := optimtest.MustHost(t, p, optimtest.WithMembers(2), optimtest.WithParams(0, theta), optimtest.WithParams(1, theta),
		optimtest.WithBatchSize(12))
	exec(t, h, optim.Prog().Alloc(1, 0).Alloc(2, 1))
	h.BeginStep(optim.StepInput{Step: 0})
	prog := optim.Prog()
	ev := prog.JointGrad([]optim.Vec{1, 2}, jointAts[:2], optim.Batch{}, optim.BNUpdate)
	r := exec(t, h, prog)
	batch := h.Batch()
	want := make([]float64, p.Numel())
	var loss float64
	for _, s := range batch {
		y := p.TrainLabel(s)
		if y == 0 {
			loss -= math.Log(1e-40) / float64(len(batch))
			continue
		}
		loss += math.Ln2 / float64(len(batch)) // p = (0, ½, ½)
		dz := []float64{0, 0.5, 0.5}
		dz[y]--
		for c := range dz {
			dz[c] /= 2 * float64(len(batch)) // each of the two identical members gets half
		}
		p.BackpropLogits(theta, s, dz, want)
	}
	if math.Abs(r.Get(ev.Loss)-loss) > 1e-13 {
		t.Errorf("loss %v, want %v", r.Get(ev.Loss), loss)
	}
	for _, out := range []optim.Vec{1, 2} {
		g := vec(t, h, out)
		for i := range g {
			if math.Abs(g[i]-want[i]) > 1e-15 {
				t.Fatalf("out %d: ∂L/∂θ[%d] = %v, want %v", out, i, g[i], want[i])
			}
		}
	}
}

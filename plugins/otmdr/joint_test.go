package otmdr_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/optlab/optlab/plugins/otmdr"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

// identical returns host options for members copies of mlp()'s member 0.
func identical(t *testing.T, members int, opts ...optimtest.HostOption) []optimtest.HostOption {
	t.Helper()
	theta0 := optimtest.MustHost(t, mlp()).Params(0)
	opts = append(opts, optimtest.WithMembers(members))
	for m := range members {
		opts = append(opts, optimtest.WithParams(m, theta0))
	}
	return opts
}

// merged returns params with more entries.
func merged(params map[string]any, more map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range params {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}

// With M identical members the joint loss on p̄ is one member's loss and
// each member's gradient is 1/M of one member's, so the global norm is
// ‖g‖/√M and each member moves by (ρ/√M)·g/‖g‖. Joint OT-MDR with (ρ₁, ρ₂)
// and learning rate lr therefore steps every member like single-model
// OT-MDR with (ρ₁/√M, ρ₂/√M) and lr/M (exact for SGD with momentum and no
// weight decay, which is linear in the gradient; the 1e-12 of the norms and
// roundings aside), in every mode.
func TestJointIdenticalMembers(t *testing.T) {
	const rho1, rho2, lr = 0.2, 0.3, 0.1
	tests := []struct {
		name   string
		params map[string]any
		steps  int // > 1 needs halves that do not depend on the seed stream's position
	}{
		{"paper, loader halves", map[string]any{"noise_std": 0, "split": "loader"}, 4},
		{"paper K=2, random halves", map[string]any{"noise_std": 0, "particles": 2}, 1},
		{"reference", map[string]any{"mode": "reference"}, 4},
		{"reference K=2 summed, loader halves", map[string]any{"mode": "reference", "particles": 2, "split": "loader"}, 3},
		{"reference mode 1.1", map[string]any{"mode": "reference", "merge_mean": true}, 4},
	}
	base := optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9})
	for _, tt := range tests {
		for _, members := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s, M=%d", tt.name, members), func(t *testing.T) {
				single := optimtest.MustHost(t, mlp(), identical(t, 1, base)...)
				sq := math.Sqrt(float64(members))
				outs1 := optimtest.MustRun(t, otmdr.New(), single, tt.steps, optimtest.WithLR(lr/float64(members)),
					hp(merged(tt.params, map[string]any{"rho1": rho1 / sq, "rho2": rho2 / sq})))
				joint := optimtest.MustHost(t, mlp(), identical(t, members, base)...)
				outsJ := optimtest.MustRun(t, otmdr.New(), joint, tt.steps, optimtest.WithLR(lr),
					hp(merged(tt.params, map[string]any{"rho1": rho1, "rho2": rho2, "joint": true})))
				for m := range members {
					if d := maxDiff(joint.Params(m), single.Params(0)); d > 1e-12 {
						t.Errorf("member %d differs from single-model OT-MDR by %g", m, d)
					}
				}
				for s := range tt.steps {
					for _, k := range []string{"loss", "acc", "loss_perturbed", "acc_perturbed"} {
						if a, b := outsJ[s].Metrics[k], outs1[s].Metrics[k]; math.Abs(a-b) > 1e-12 {
							t.Errorf("step %d: joint %s = %v, single %v", s, k, a, b)
						}
					}
				}
			})
		}
	}
}

// ρ₁ = ρ₂ = 0, σ = 0: joint OT-MDR is SGD on the joint loss, bitwise: every
// member steps with its gradient of the loss on p̄ at θ on the full batch
// (driven here by hand with JointGrad and BaseStep). For identical members
// that is the sgd plugin at lr/M (bitwise for M = 2, where p̄ = p and the
// gradient halves exactly).
func TestJointZeroRhoIsJointSGD(t *testing.T) {
	ctx := context.Background()
	base := optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9, WeightDecay: 5e-4})
	sched := func(s int64, _ int) float64 { return 0.1 / float64(1+s) }
	const members, steps = 3, 5
	for _, params := range []map[string]any{
		{"rho1": 0, "rho2": 0, "noise_std": 0, "joint": true},
		{"rho1": 0, "rho2": 0, "noise_std": 0, "joint": true, "particles": 2},
		{"rho1": 0, "rho2": 0, "mode": "reference", "joint": true},
	} {
		ho := optimtest.MustHost(t, mlp(), optimtest.WithMembers(members), base)
		optimtest.MustRun(t, otmdr.New(), ho, steps, optimtest.WithSchedule(sched), hp(params))

		hs := optimtest.MustHost(t, mlp(), optimtest.WithMembers(members), base)
		hs2 := optim.NewHandles().Sub("sgd")
		outs, ats := hs2.PerMember("g", members), make([]optim.Vec, members)
		alloc := hs2.Prog()
		for m := range members {
			ats[m] = optim.ParamsOf(m)
			alloc.Alloc(outs[m], m)
		}
		if _, err := hs.Exec(ctx, alloc); err != nil {
			t.Fatal(err)
		}
		for s := range int64(steps) {
			hs.BeginStep(optim.StepInput{Step: s, LR: sched(s, 0)})
			p := hs2.Prog()
			p.JointGrad(outs, ats, optim.Batch{}, optim.BNFreeze)
			for m := range members {
				p.BaseStep(ats[m], outs[m])
			}
			if _, err := hs.Exec(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		for m := range members {
			if !slices.Equal(ho.Params(m), hs.Params(m)) {
				t.Errorf("%v member %d: joint OT-MDR differs from SGD on the joint loss", params, m)
			}
		}
	}

	for _, m := range []int{2, 3} {
		momentum := optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9})
		joint := optimtest.MustHost(t, mlp(), identical(t, m, momentum)...)
		optimtest.MustRun(t, otmdr.New(), joint, steps, optimtest.WithLR(0.1),
			hp(map[string]any{"rho1": 0, "rho2": 0, "noise_std": 0, "joint": true}))
		one := optimtest.MustHost(t, mlp(), identical(t, 1, momentum)...)
		optimtest.MustRun(t, sgd.New(), one, steps, optimtest.WithLR(0.1/float64(m)))
		tol := 1e-13
		if m == 2 {
			tol = 0
		}
		for i := range m {
			if d := maxDiff(joint.Params(i), one.Params(0)); d > tol {
				t.Errorf("M = %d member %d: differs from sgd at lr/M by %g", m, i, d)
			}
		}
	}
}

// The ascents use one norm across members, √(Σₘ‖gₘ‖²), read back from the
// recorded points: θ¹ₘ = θₘ + ρ₁g¹ₘ/(‖g¹‖+1e-12), so the whole ensemble
// moves by ρ₁ (up to the 1e-12), and θ²ₘ = θ¹ₘ + ρ₂dₘ/(‖g²‖+1e-12). Every pass takes all
// members on the same samples: the halves of one split per particle, then
// the whole batch. Noise is drawn per member.
func TestJointGlobalNorm(t *testing.T) {
	const rho1, rho2, members, k = 0.3, 0.5, 3, 2
	for _, merge := range []bool{false, true} {
		h := optimtest.MustHost(t, mlp(), optimtest.WithMembers(members), optimtest.WithBatchSize(16))
		outs := optimtest.MustRun(t, otmdr.New(), h, 1, optimtest.WithLR(0.1),
			hp(map[string]any{"rho1": rho1, "rho2": rho2, "noise_std": 0, "particles": k, "merge_grad": merge, "joint": true}))
		recs := make([][]optimtest.GradRecord, members)
		for m := range members {
			recs[m] = passes(h, 0, m)
			if len(recs[m]) != 3*k {
				t.Fatalf("member %d: %d passes", m, len(recs[m]))
			}
		}
		var loss float64
		for j := range 3 * k {
			for m := range members {
				if r := recs[m][j]; r.Joint != members || !slices.Equal(r.Samples, recs[0][j].Samples) || r.Loss != recs[0][j].Loss {
					t.Fatalf("pass %d: member %d's record is not of one joint pass with the others: %+v", j, m, r)
				}
			}
			if j%3 == 0 {
				loss += recs[0][j].Loss / k
			}
		}
		if math.Abs(outs[0].Metrics["loss"]-loss) > 1e-15 {
			t.Errorf("loss metric %v, want the mean joint B¹ loss %v", outs[0].Metrics["loss"], loss)
		}
		for p := range k {
			r := func(m, pass int) optimtest.GradRecord { return recs[m][3*p+pass] }
			var n1, n2, moved float64
			for m := range members {
				n1 += norm(r(m, 0).Grad) * norm(r(m, 0).Grad)
				n2 += norm(r(m, 1).Grad) * norm(r(m, 1).Grad)
			}
			n1, n2 = math.Sqrt(n1), math.Sqrt(n2)
			for m := range members {
				th, th1, th2 := r(m, 0).At, r(m, 1).At, r(m, 2).At
				g1, g2 := r(m, 0).Grad, r(m, 1).Grad
				for i := range th {
					d := g2[i]
					if merge {
						d += g1[i]
					}
					w1, w2 := th[i]+rho1*g1[i]/(n1+1e-12), th1[i]+rho2*d/(n2+1e-12)
					if math.Abs(th1[i]-w1) > 1e-15 || math.Abs(th2[i]-w2) > 1e-15 {
						t.Fatalf("merge %v particle %d member %d: θ¹[%d] = %v, θ²[%d] = %v; want %v, %v",
							merge, p, m, i, th1[i], i, th2[i], w1, w2)
					}
				}
				moved += norm(sub(th1, th)) * norm(sub(th1, th))
			}
			if want := rho1 * n1 / (n1 + 1e-12); math.Abs(math.Sqrt(moved)-want) > 1e-14 {
				t.Errorf("the ensemble moved by %v in the first ascent, want ρ₁‖g¹‖/(‖g¹‖+1e-12) = %v", math.Sqrt(moved), want)
			}
			b1, b2, full := r(0, 0).Samples, r(0, 1).Samples, r(0, 2).Samples
			if u := slices.Sorted(slices.Values(append(slices.Clone(b1), b2...))); !slices.Equal(u, slices.Sorted(slices.Values(full))) ||
				!slices.Equal(full, h.Batch()) {
				t.Errorf("particle %d: halves %v + %v do not partition the batch %v", p, b1, b2, full)
			}
		}
	}

	h := optimtest.MustHost(t, mlp(), identical(t, 2)...)
	optimtest.MustRun(t, otmdr.New(), h, 1, optimtest.WithLR(0.1),
		hp(map[string]any{"rho1": 0, "rho2": 0, "noise_std": 0.05, "joint": true}))
	r0, r1 := passes(h, 0, 0), passes(h, 0, 1)
	if slices.Equal(sub(r0[1].At, r0[0].At), sub(r1[1].At, r1[0].At)) {
		t.Error("identical members got the same noise")
	}
}

// Joint mode keeps the cost: one Exec per step whatever M and K, one
// JointGrad per pass (3K per step, no Grad), BatchNorm passes per member as
// bn says, one base step per member and the same vectors per member.
func TestJointExecCountAndBN(t *testing.T) {
	tests := []struct {
		name             string
		params           map[string]any
		members, k       int
		update, freeze   int // per member per particle
		vectorsPerMember int
	}{
		{"paper, 2 members", nil, 2, 1, 2, 1, 2},
		{"paper K=3, 3 members", map[string]any{"particles": 3}, 3, 3, 2, 1, 3},
		{"reference K=2, 5 members", map[string]any{"mode": "reference", "particles": 2}, 5, 2, 2, 1, 4},
		{"bn first", map[string]any{"bn": "first", "particles": 2}, 2, 2, 1, 2, 3},
		{"bn all", map[string]any{"bn": "all"}, 3, 1, 3, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := optimtest.MustHost(t, mlp(), optimtest.WithMembers(tt.members))
			const steps = 2
			optimtest.MustRun(t, otmdr.New(), h, steps, optimtest.WithLR(0.1), hp(merged(tt.params, map[string]any{"joint": true})))
			for s := range int64(steps) {
				if n := h.ExecCount(s); n != 1 {
					t.Errorf("step %d: %d Exec calls, want 1 (all K particles in one program)", s, n)
				}
				if n := h.ReadCount(s); n != 0 {
					t.Errorf("step %d: %d values read back, want 0", s, n)
				}
			}
			joint := 0
			for _, e := range h.Execs() {
				for _, op := range e.Program.Ops {
					switch op := op.(type) {
					case optim.Grad:
						t.Fatalf("a Grad op in joint mode: %+v", op)
					case optim.JointGrad:
						joint++
						if len(op.Ats) != tt.members || len(op.Outs) != tt.members {
							t.Fatalf("JointGrad over %d members: %+v", len(op.Ats), op)
						}
					}
				}
			}
			if joint != 3*tt.k*steps {
				t.Errorf("%d JointGrad ops, want 3K per step = %d", joint, 3*tt.k*steps)
			}
			for m := range tt.members {
				st := h.Stats(m)
				if st.BNUpdate != steps*tt.k*tt.update || st.BNFreeze != steps*tt.k*tt.freeze || st.BaseSteps != steps {
					t.Errorf("member %d: %+v", m, st)
				}
			}
			if n := len(h.Handles()); n != tt.members*tt.vectorsPerMember {
				t.Errorf("%d vectors, want %d per member", n, tt.vectorsPerMember)
			}
		})
	}
}

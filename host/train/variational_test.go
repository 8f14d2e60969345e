package train

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/plugins/sgvb"
	"github.com/optlab/optlab/sdk/optim"
)

// bbb is a minimal Bayes-by-backprop optimizer for host tests: one weight
// sample per step, shared by two passes so the test can check that passes
// sharing Eps see the same weights.
type bbb struct {
	optim.Defaults
	h                optim.Host
	twoPass          bool
	mismatch         int
	hs               *optim.Handles
	gMu, gRho, kappa optim.Vec
}

func (b *bbb) Info() optim.Info {
	return optim.Info{Name: "bbb", Features: optim.Features{Predictive: true}}
}

func (b *bbb) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	b.h, b.hs = h, cfg.Namespace("bbb")
	b.gMu, b.gRho, b.kappa = b.hs.New("g_mu"), b.hs.New("g_rho"), b.hs.New("kappa")
	_, err := h.Exec(ctx, b.hs.Prog().Alloc(b.gMu, 0).Alloc(b.gRho, 0).Alloc(b.kappa, 0))
	return err
}

func (b *bbb) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	p := b.hs.Prog().RandN(b.kappa, 1, in.Step+1)
	ev := p.GradOp(optim.Grad{Out: b.gMu, OutRho: b.gRho, At: optim.Params, Eps: b.kappa})
	var again optim.Eval
	if b.twoPass {
		again = p.GradOp(optim.Grad{At: optim.Params, Eps: b.kappa, BN: optim.BNFreeze})
	}
	p.BaseStep(optim.Params, b.gMu).BaseStep(optim.RhoOf(0), b.gRho).ReportMetrics(ev.Loss, ev.Acc)
	if b.twoPass {
		p.Read(ev.Loss, again.Loss)
	}
	r, err := b.h.Exec(ctx, p)
	if err != nil {
		return optim.StepOutput{}, err
	}
	if b.twoPass && r.Get(ev.Loss) != r.Get(again.Loss) {
		b.mismatch++
	}
	return optim.StepOutput{}, nil
}

func (b *bbb) Predictive(context.Context) (optim.Predictive, error) {
	return optim.Predictive{Kind: optim.Samples}, nil
}

func variationalTOML(extra string) string {
	return strings.Replace(digitsTOML, "[train]", "variational = true\n"+extra+"\n[train]", 1)
}

func TestVariationalTrainsAndSharesNoise(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	r, exp := newRunner(t, w, variationalTOML(""))
	opt := &bbb{twoPass: true}
	rec := runOnce(t, r, exp, opt, nil)
	if opt.mismatch != 0 {
		t.Errorf("%d steps where two passes with the same Eps gave different losses", opt.mismatch)
	}
	if acc := rec.Metrics["acc"]; acc < 0.8 {
		t.Errorf("variational CNN test accuracy %.3f after 3 epochs, want ≥ 0.8", acc)
	}
}

// With σ → 0 (ρ = −30) and β = 0 a variational step is the deterministic
// step, with weight samples or with the local reparameterization: the runs
// agree up to rounding.
func TestVariationalZeroSigmaIsDeterministic(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	rd, expd := newRunner(t, w, digitsTOML)
	d := runOnce(t, rd, expd, sgd.New(), nil)
	for _, local := range []bool{false, true} {
		t.Run(fmt.Sprintf("local_reparam=%v", local), func(t *testing.T) {
			r, exp := newRunner(t, w, variationalTOML(fmt.Sprintf("[model.variational_opts]\nrho_init = -30.0\nbeta = 0.0\nlocal_reparam = %v", local)))
			v := runOnce(t, r, exp, &bbb{}, nil)
			for _, k := range []string{"acc", "nll", "train_loss"} {
				if math.Abs(v.Metrics[k]-d.Metrics[k]) > 1e-3*math.Max(1, math.Abs(d.Metrics[k])) {
					t.Errorf("%s: variational(σ→0) %v, deterministic %v", k, v.Metrics[k], d.Metrics[k])
				}
			}
		})
	}
}

// With the local reparameterization every pass draws its own noise: two
// passes sharing Eps no longer see the same weights, and training works.
func TestLocalReparamTrains(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	r, exp := newRunner(t, w, variationalTOML("[model.variational_opts]\nlocal_reparam = true"))
	opt := &bbb{twoPass: true}
	rec := runOnce(t, r, exp, opt, nil)
	if opt.mismatch == 0 {
		t.Error("two passes with the same Eps gave the same loss at every step: the activation noise is not fresh")
	}
	if acc := rec.Metrics["acc"]; acc < 0.8 {
		t.Errorf("variational CNN (local reparameterization) test accuracy %.3f after 3 epochs, want ≥ 0.8", acc)
	}
}

// The SGVB and OT-MDR-SGVB plugins' algorithms run on the real engine.
func TestSGVBPluginsOnEngine(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	for _, c := range []struct {
		name string
		opt  optim.Optimizer
	}{{"sgvb", sgvb.New()}, {"otmdr-sgvb", sgvb.NewOTMDR()}} {
		t.Run(c.name, func(t *testing.T) {
			r, exp := newRunner(t, w, variationalTOML("[model.variational_opts]\nbeta = 0.1\nmc_samples = 4"))
			rec := runOnce(t, r, exp, c.opt, map[string]any{"mc_samples": int64(4)})
			if acc := rec.Metrics["acc"]; acc < 0.8 {
				t.Errorf("%s: test accuracy %.3f after 3 epochs, want ≥ 0.8", c.name, acc)
			}
		})
	}
}

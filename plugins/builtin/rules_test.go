package builtin_test

import (
	"slices"
	"testing"

	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

// SAM over every built-in update rule is SAM-<rule>: with ρ = 0 its
// perturbation is zero and its second gradient the first, so it steps
// exactly as the rule's own plugin does (bitwise, 12 steps, two members);
// with ρ > 0 it trains elsewhere. A rule added to Rules is checked here
// without a test of its own.
func TestSAMOverEveryRule(t *testing.T) {
	newOpt := builtins(t)
	for _, rule := range builtin.Rules() {
		t.Run(rule.Name, func(t *testing.T) {
			sched := optimtest.WithSchedule(func(step int64, _ int) float64 { return 0.02 / float64(step+1) })
			newHost := func() *optimtest.Host {
				return optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 5, Samples: 64, Seed: 3}),
					optimtest.WithBatchSize(16), optimtest.WithMembers(2))
			}
			alone, zero, perturbed := newHost(), newHost(), newHost()
			optimtest.MustRun(t, newOpt(rule.Name), alone, 12, sched)
			optimtest.MustRun(t, newOpt("sam"), zero, 12, sched, optimtest.WithHParams(map[string]any{"rho": 0.0, "update": rule.Name}))
			optimtest.MustRun(t, newOpt("sam"), perturbed, 12, sched, optimtest.WithHParams(map[string]any{"rho": 0.05, "update": rule.Name}))
			for m := range 2 {
				if !slices.Equal(zero.Params(m), alone.Params(m)) {
					t.Errorf("member %d: SAM (ρ = 0) over %s differs from the %s plugin", m, rule.Name, rule.Name)
				}
			}
			if slices.Equal(perturbed.Params(0), alone.Params(0)) {
				t.Errorf("SAM (ρ = 0.05) over %s steps as the %s plugin: the perturbation does nothing", rule.Name, rule.Name)
			}
		})
	}
}

// Every SAM variant over every built-in update rule (LookSAM-AdamW,
// ESAM-SOAP, …):
// with ρ = 0 (and the settings that make the variant's direction the
// gradient: LookSAM's k = 1, GSAM's α = 0) its perturbed pass is the
// gradient at θ, so it steps exactly as the rule's own plugin does
// (bitwise, 12 steps, two members); with its default ρ it trains
// elsewhere; and a run interrupted after 7 steps resumes bitwise with the
// variant's state and the rule's (both in its checkpoint).
func TestVariantsOverEveryRule(t *testing.T) {
	newOpt := builtins(t)
	newHost := func(opts ...optimtest.HostOption) *optimtest.Host {
		return optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 5, Samples: 64, Seed: 3}),
			append(opts, optimtest.WithBatchSize(16), optimtest.WithMembers(2))...)
	}
	sched := optimtest.WithSchedule(func(step int64, _ int) float64 { return 0.02 / float64(step+1) })
	for _, v := range []struct {
		name string
		flat map[string]any // ρ = 0 and what makes the direction the gradient
	}{
		{"looksam", map[string]any{"rho": 0.0, "k": int64(1)}},
		{"aesam", map[string]any{"rho": 0.0}},
		{"fsam", map[string]any{"rho": 0.0}},
		{"wsam", map[string]any{"rho": 0.0}},
		{"gsam", map[string]any{"rho": 0.0, "alpha": 0.0}},
		{"esam", map[string]any{"rho": 0.0}},
	} {
		for _, rule := range builtin.Rules() {
			t.Run(v.name+"/"+rule.Name, func(t *testing.T) {
				with := func(ps map[string]any) optimtest.RunOption {
					m := map[string]any{"update": rule.Name}
					for k, x := range ps {
						m[k] = x
					}
					return optimtest.WithHParams(m)
				}
				alone, flat, perturbed := newHost(), newHost(), newHost()
				optimtest.MustRun(t, newOpt(rule.Name), alone, 12, sched)
				optimtest.MustRun(t, newOpt(v.name), flat, 12, sched, with(v.flat))
				optimtest.MustRun(t, newOpt(v.name), perturbed, 12, sched, with(nil))
				for m := range 2 {
					if !slices.Equal(flat.Params(m), alone.Params(m)) {
						t.Errorf("member %d: %s (ρ = 0) over %s differs from the %s plugin", m, v.name, rule.Name, rule.Name)
					}
				}
				if slices.Equal(perturbed.Params(0), alone.Params(0)) {
					t.Errorf("%s over %s steps as the %s plugin: the perturbation does nothing", v.name, rule.Name, rule.Name)
				}
				for s := range int64(12) {
					if n, r := perturbed.ExecCount(s), perturbed.ReadCount(s); n != 1 || r != 0 {
						t.Errorf("step %d: %d Execs, %d reads; want 1 and 0", s, n, r)
					}
				}
				optimtest.MustResume(t, func() optim.Optimizer { return newOpt(v.name) }, newHost, 12, 7, sched, with(nil))
			})
		}
	}
}

// builtins returns a constructor of the built-in methods by name that
// fails t on an unknown one.
func builtins(t *testing.T) func(name string) optim.Optimizer {
	reg := builtin.Registry()
	return func(name string) optim.Optimizer {
		opt, err := reg.New(name)
		if err != nil {
			t.Fatal(err)
		}
		return opt
	}
}

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
	reg := builtin.Registry()
	newOpt := func(name string) optim.Optimizer {
		opt, err := reg.New(name)
		if err != nil {
			t.Fatal(err)
		}
		return opt
	}
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

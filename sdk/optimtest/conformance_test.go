package optimtest_test

import (
	"io"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

// The exact host passes the conformance suite: with deterministic members
// of a small MLP (two, and one with a tall and a wide matrix), with a
// variational member, and seen through optim.Trace.
func TestHostConformance(t *testing.T) {
	mlp := func() optimtest.Problem {
		return optimtest.NewMLP(optimtest.MLPConfig{Hidden: 3, Samples: 48, Seed: 2})
	}
	hosts := []struct {
		name string
		new  func(t *testing.T) optim.Host
	}{
		{"mlp", func(t *testing.T) optim.Host {
			return optimtest.MustHost(t, mlp(), optimtest.WithMembers(2), optimtest.WithBatchSize(16))
		}},
		{"mlp, tall and wide", func(t *testing.T) optim.Host { // fc1 5×4, fc2 3×5 (NewtonSchulz transposes fc1)
			return optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 5, Samples: 48, Seed: 2}), optimtest.WithBatchSize(16))
		}},
		{"variational", func(t *testing.T) optim.Host {
			return optimtest.MustHost(t, mlp(), optimtest.WithMembers(2), optimtest.WithBatchSize(16),
				optimtest.WithVariational(1, nil, 0.5, 1, optimtest.KLqp))
		}},
		{"traced", func(t *testing.T) optim.Host {
			return optim.Trace(optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16)), io.Discard, false)
		}},
	}
	for _, h := range hosts {
		t.Run(h.name, func(t *testing.T) {
			optimtest.TestHost(t, h.new, optimtest.HostTestOptions{BaseSGD: true})
		})
	}
	// The base optimizer's state (protocol minor 10) with SGD momentum.
	t.Run("momentum", func(t *testing.T) {
		optimtest.TestHost(t, func(t *testing.T) optim.Host {
			return optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9}))
		}, optimtest.HostTestOptions{Momentum: 0.9, Only: "BaseState/"})
	})
}

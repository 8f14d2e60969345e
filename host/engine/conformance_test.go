package engine

import (
	"fmt"
	"testing"

	"github.com/optlab/optlab/internal/testutil"

	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

// The engine passes the conformance suite of optim.Host on CPU, with two
// members of different layouts (small sigmoid MLPs) sharing one batch, and
// with variational members.
func TestConformance(t *testing.T) {
	const features, classes, batch = 4, 3, 8
	x, y := testutil.Features(batch, features, classes, 7)
	newHost := func(cfg Config) func(t *testing.T) optim.Host {
		return func(t *testing.T) optim.Host {
			cfg.TrainSize, cfg.BatchSize = 64, batch
			e := semEngine(t, cfg, semTiny(t, []int64{features}, 5, classes), semTiny(t, []int64{features}, 7, classes))
			semBatch(t, e, 0, x, y)
			semDo(t, e, func(*tensor.Scope) error {
				e.SetBatch(1, e.members[0].x, e.members[0].y)
				return nil
			})
			return e
		}
	}
	hosts := []struct {
		name string
		cfg  Config
	}{
		{"two layouts", Config{Seed: 1, LabelSmoothing: 0.1}},
		{"variational", Config{Seed: 2, Variational: &Variational{
			PriorSigma: 0.1, RhoInit: -3, RhoInitStd: 0.1, KL: "qp", KLReduction: "sum", Beta: 1}}},
	}
	// Spilled vectors (train.spill), on a fake second device, so that an
	// op that mixes them with the device's tensors fails as it would on a
	// GPU: every plugin vector spilled (a budget of one byte), or the first
	// one on the device and the others spilled (a budget of one vector of
	// member 0; member 1's are larger).
	for _, h := range hosts[:2] {
		for _, budget := range []int64{1, 4 * (4*5 + 5 + 5*3 + 3)} {
			c := h.cfg
			c.DeviceBudget, c.Spill, c.spillTo = budget, true, tensor.FakeDevice()
			hosts = append(hosts, struct {
				name string
				cfg  Config
			}{fmt.Sprintf("%s, spilled beyond %d bytes", h.name, budget), c})
		}
	}
	for _, h := range hosts {
		t.Run(h.name, func(t *testing.T) {
			optimtest.TestHost(t, newHost(h.cfg), optimtest.HostTestOptions{Tol: 1e-5, BaseSGD: true})
		})
	}
	// The base optimizer's state (protocol minor 10) with SGD momentum, on
	// the device and spilled.
	for _, budget := range []int64{0, 1} {
		cfg := Config{Seed: 3, Base: BaseConfig{Name: "sgd", Momentum: 0.9}}
		if budget > 0 {
			cfg.DeviceBudget, cfg.Spill, cfg.spillTo = budget, true, tensor.FakeDevice()
		}
		t.Run(fmt.Sprintf("momentum, device budget %d", budget), func(t *testing.T) {
			optimtest.TestHost(t, newHost(cfg), optimtest.HostTestOptions{Tol: 1e-5, Momentum: 0.9, Only: "BaseState/"})
		})
	}
}

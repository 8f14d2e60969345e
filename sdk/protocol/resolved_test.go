package protocol_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
	"github.com/optlab/optlab/sdk/protocol"
)

// resolver is an optimizer that resolves a -1 "auto" in Configure: rho2 =
// 2·rho1, as OT-MDR does, and reports it (optim.Resolver) with values of
// the other kinds, in Go types a plugin may use.
type resolver struct {
	keeper
	rho2     float64
	resolved map[string]any // nil: report rho2 and the rest
}

func (r *resolver) Configure(_ context.Context, _ optim.Host, cfg optim.Config) error {
	r.rho2, _ = cfg.Params["rho2"].(float64)
	if r.rho2 == -1 {
		r.rho2 = 2 * cfg.Params["rho1"].(float64)
	}
	return nil
}

func (r *resolver) Resolved() map[string]any {
	if r.resolved != nil {
		return r.resolved
	}
	return map[string]any{"rho2": r.rho2, "steps": 3, "merge_grad": true, "split": "random"}
}

// The values an optim.Resolver reports after Configure reach the host in
// Configure's reply, in Config.Params' types; an optimizer without one
// gives none, and a value that cannot travel fails Configure with Internal.
func TestResolvedOverTheWire(t *testing.T) {
	h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 3, Samples: 8, Seed: 1}))
	cfg := optim.Config{Params: map[string]any{"rho1": 0.05, "rho2": -1.0}, Members: 1}
	configure := func(opt optim.Optimizer) (map[string]any, error) {
		return dispense(t, func() optim.Optimizer { return opt }).Configure(context.Background(), h, cfg, protocol.HostOptions{})
	}

	got, err := configure(&resolver{})
	if err != nil {
		t.Fatalf("Configure: %v", err)
	}
	want := map[string]any{"rho2": 0.1, "steps": int64(3), "merge_grad": true, "split": "random"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("resolved = %#v, want %#v", got, want)
	}

	if got, err := configure(&keeper{}); err != nil || got != nil {
		t.Errorf("an optimizer without Resolved: resolved = %v, %v; want nil, nil", got, err)
	}

	_, err = configure(&resolver{resolved: map[string]any{"rho2": []float64{0.1}}})
	if protocol.Code(err) != codes.Internal || !strings.Contains(err.Error(), `invalid Resolved: hyperparameter "rho2"`) {
		t.Errorf("an invalid resolved value: err = %v, want Internal invalid Resolved", err)
	}
}

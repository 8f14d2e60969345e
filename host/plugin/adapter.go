package plugin

import (
	"context"

	"github.com/optlab/optlab/sdk/optim"
)

// AsOptimizer returns the plugin as an optim.Optimizer, so that the training
// loop treats in-process and plugin optimizers alike: one adapter whatever
// the plugin's features. Its Info is the Info fetched at Launch (or by the
// latest Client.Info), whose Features say which of the optional methods
// the host calls (a plugin built before features had names declares them
// with the booleans of its Info reply; see sdk/protocol's Conn.Info).
// Resolved returns what the last Configure's reply carried.
//
// Configure's h is the host that the plugin drives for the rest of the run
// (it is served to the plugin, see Client.Configure).
func (c *Client) AsOptimizer() optim.Optimizer { return adapter{c} }

// adapter is the Client as an optim.Optimizer.
type adapter struct{ c *Client }

func (a adapter) Info() optim.Info {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	return a.c.info
}

func (a adapter) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	return a.c.Configure(ctx, h, cfg)
}

func (a adapter) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	return a.c.Step(ctx, in)
}

func (a adapter) Predictive(ctx context.Context) (optim.Predictive, error) {
	return a.c.Predictive(ctx)
}

func (a adapter) SaveState(ctx context.Context) ([]byte, []optim.Vec, error) {
	return a.c.SaveState(ctx)
}

func (a adapter) LoadState(ctx context.Context, blob []byte) error { return a.c.LoadState(ctx, blob) }

func (a adapter) Finalize(ctx context.Context) error { return a.c.Finalize(ctx) }

func (a adapter) Resolved() map[string]any { return a.c.Resolved() }

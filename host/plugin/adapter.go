package plugin

import (
	"context"

	"github.com/optlab/optlab/sdk/optim"
)

// AsOptimizer returns the plugin as an optim.Optimizer, so that the training
// loop treats in-process and plugin optimizers alike. The value also
// implements optim.Predictor and optim.Stateful exactly when the plugin's
// optimizer does (as reported by its Info at Launch), and always
// optim.Resolver (Client.Resolved: the values come with Configure's reply,
// none from an optimizer without Resolved) and optim.Finalizer (a call
// into the plugin when its optimizer has one, else nothing to do).
//
// Configure's h is the host that the plugin will drive (it is served to the
// plugin, see Client.Configure). Step's h is ignored: the plugin keeps
// driving the host given to Configure. Info returns the Info fetched at
// Launch (or by the latest Client.Info).
func (c *Client) AsOptimizer() optim.Optimizer {
	c.mu.Lock()
	predictor, stateful := c.predictor, c.stateful
	c.mu.Unlock()
	a := adapter{c}
	switch {
	case predictor && stateful:
		return fullAdapter{a}
	case predictor:
		return predictorAdapter{a}
	case stateful:
		return statefulAdapter{a}
	}
	return a
}

type adapter struct{ c *Client }

func (a adapter) Info() optim.Info {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	return a.c.info
}

func (a adapter) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	return a.c.Configure(ctx, h, cfg)
}

func (a adapter) Resolved() map[string]any { return a.c.Resolved() }

// Finalize implements optim.Finalizer; h is ignored, as in Step.
func (a adapter) Finalize(ctx context.Context, _ optim.Host) error { return a.c.Finalize(ctx) }

func (a adapter) Step(ctx context.Context, _ optim.Host, in optim.StepInput) (optim.StepOutput, error) {
	return a.c.Step(ctx, in)
}

func (a adapter) predictive(ctx context.Context) (optim.Predictive, error) {
	return a.c.Predictive(ctx)
}

func (a adapter) saveState(ctx context.Context) ([]byte, []optim.Vec, error) {
	return a.c.SaveState(ctx)
}

func (a adapter) loadState(ctx context.Context, blob []byte) error {
	return a.c.LoadState(ctx, blob)
}

type predictorAdapter struct{ adapter }

func (a predictorAdapter) Predictive(ctx context.Context) (optim.Predictive, error) {
	return a.predictive(ctx)
}

type statefulAdapter struct{ adapter }

func (a statefulAdapter) SaveState(ctx context.Context) ([]byte, []optim.Vec, error) {
	return a.saveState(ctx)
}

func (a statefulAdapter) LoadState(ctx context.Context, blob []byte) error {
	return a.loadState(ctx, blob)
}

type fullAdapter struct{ adapter }

func (a fullAdapter) Predictive(ctx context.Context) (optim.Predictive, error) {
	return a.predictive(ctx)
}

func (a fullAdapter) SaveState(ctx context.Context) ([]byte, []optim.Vec, error) {
	return a.saveState(ctx)
}

func (a fullAdapter) LoadState(ctx context.Context, blob []byte) error {
	return a.loadState(ctx, blob)
}

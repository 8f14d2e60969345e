// Package ensembles is the ensemble baselines of the OT-MDR paper's Table 3
// in one plugin, selected by the hyperparameter kind:
//
//   - kind = "deep": deep ensembles (Lakshminarayanan et al., 2017). The run's
//     Config.Members members (archs = ["resnet10*5"], or
//     "resnet18+mobilenet+efficientnet-b0") train independently: the host
//     initializes member m with its own seed, and the plugin declares
//     optim.Features.MemberDataOrder so that every member gets its own data order.
//     Each member's step is done by the member optimizer (member = "sgd",
//     "sam", "bsam" or "otmdr" with the built-in members of
//     plugins/builtin): the very optimizer of that plugin, made by the
//     Options.Members registry and configured with the run's members, its
//     own hyperparameters, passed as <member>_<name> (sam_rho, otmdr_rho1,
//     …), and a namespace inside the ensemble's ("ensembles/sam/…").
//     So the paper's "SGD", "SAM" and "OT-MDR" ensemble rows differ in one
//     setting. The predictive averages the members' probabilities (a Members
//     predictive over ParamsOf(m)), or is the member optimizer's own when it
//     has one (otmdr: the same; bsam: the Gaussian for one member, the members'
//     means for more).
//   - kind = "snapshot": snapshot ensembles (Huang et al., 2017;
//     gaohuang/SnapshotEnsemble). One member; per-step cosine annealing with
//     restarts, lr = ½·α0·(1+cos(π·T_cur/T_cycle)) with T_cycle =
//     ⌊TotalSteps/cycles⌋ steps (the last cycle takes the remainder) and
//     T_cur 1-based, so the last step of a cycle has rate 0; α0 = lr_max.
//     A snapshot of the model is kept at the end of every cycle.
//   - kind = "fge": fast geometric ensembling (Garipov et al., 2018;
//     timgaripov/dnn-mode-connectivity). One member; a pretraining phase of
//     pretrain_epochs epochs with train.py's schedule (pretrain_lr times 1
//     for the first 50% of the schedule, linear down to 0.01 at 90%, then
//     0.01, set per epoch), then fge.py's triangular cyclic rate between
//     lr_1 (cycle boundaries) and lr_2 (mid-cycle) with a cycle of cycle
//     epochs, and a snapshot at the end of every FGE epoch k with
//     k mod cycle + 1 = cycle/2, when the rate reaches lr_2.
//
// For snapshot and FGE the member optimizer (sgd by default: the
// experiment's base optimizer, e.g. SGD with Nesterov momentum, through
// BaseStep) does the step and the plugin sets the step's rate with SetLR,
// sent in front of the member optimizer's first program (no extra round
// trip), and as StepInput.LR; only members whose Info declares optim.Features.BaseStep
// can be scheduled. Snapshots are vectors the plugin allocates in
// Configure, after the member optimizer's (all of them, so that a resumed
// run's Configure recreates them and the host can restore their contents),
// named ensembles/snapshot[k]; taking one costs one extra Exec
// (a Copy with BN, protocol minor 3), so that a snapshot keeps the
// BatchNorm running statistics of its moment, as the published code does
// (Huang et al. save whole models; fge.py predicts with the model as it is
// at mid-cycle). The predictive averages the snapshots' probabilities;
// before the first snapshot it is the live parameters.
//
// Hyperparameters that the chosen kind or member does not use must keep
// their defaults: setting one is an error rather than a silent no-op.
//
// The golden op traces in testdata are the op-level description, with the
// handles by name: trace_deep.golden (two sgd members), trace_snapshot.golden
// and trace_fge.golden.
package ensembles

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/optlab/optlab/plugins/compose"
	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Options tell New which optimizers may drive the members' steps, and
// which of them follow SetLR (snapshot and FGE can schedule only those).
// The ensembles package imports none of them: the caller lists them
// (plugins/builtin lists the built-in methods once, for the plugins and for
// the wrapping methods alike).
type Options = compose.Options

// Kinds of ensemble (the kind hyperparameter).
const (
	Deep     = "deep"
	Snapshot = "snapshot"
	FGE      = "fge"
)

// Config holds the ensemble's own hyperparameters. The member optimizers'
// are in the schema too, prefixed with "<member>_".
type Config struct {
	Kind   string `hp:"kind" enum:"deep|snapshot|fge" doc:"\"deep\" (independent members), \"snapshot\" (Huang et al.) or \"fge\" (Garipov et al.)"`
	Member string `hp:"member" doc:"optimizer of each member's step: \"sgd\", \"sam\", \"bsam\" (deep only) or \"otmdr\"; its hyperparameters are <member>_<name>"`

	Cycles int     `hp:"cycles" range:"[1,)" doc:"snapshot: number of cosine cycles (= snapshots); T_cycle = floor(total steps/cycles)"`
	LRMax  float64 `hp:"lr_max" range:"[0,)" doc:"snapshot: α0, the rate at the start of each cycle; 0: the step's scheduled LR (StepInput.LR)"`

	PretrainEpochs   int     `hp:"pretrain_epochs" range:"[-1,)" doc:"fge: epochs of pretraining before the cycles; -1: floor(pretrain_fraction × run epochs)"`
	PretrainFraction float64 `hp:"pretrain_fraction" range:"[0,1)" doc:"fge: share of the run's epochs spent pretraining when pretrain_epochs = -1 (0.8: epoch 160 of 200, as the README recipe)"`
	PretrainLR       float64 `hp:"pretrain_lr" range:"[0,)" doc:"fge: base rate of train.py's pretraining schedule; 0: the step's scheduled LR (StepInput.LR)"`
	PretrainSchedule string  `hp:"pretrain_schedule" enum:"budget|pretrain" doc:"fge: train.py schedule over the run's whole budget, cut where FGE starts (\"budget\", the README recipe) or over the pretraining epochs alone (\"pretrain\")"`
	LR1              float64 `hp:"lr_1" range:"[0,)" doc:"fge: α1, the rate at cycle boundaries (the code's use; the README calls LR1 the minimum)"`
	LR2              float64 `hp:"lr_2" range:"[0,)" doc:"fge: α2, the rate at mid-cycle, when snapshots are taken"`
	Cycle            int     `hp:"cycle" doc:"fge: cycle length in epochs (even, ≥ 2)"`
}

func defaults() Config {
	return Config{Kind: Deep, Member: compose.DefaultMember, Cycles: 5, LRMax: 0.2,
		PretrainEpochs: -1, PretrainFraction: 0.8, PretrainLR: 0.1, PretrainSchedule: "budget",
		LR1: 0.05, LR2: 1e-4, Cycle: 4}
}

// kindOf names the kind that uses each of Config's own hyperparameters
// ("" for all kinds).
func kindOf(name string) string {
	switch name {
	case "cycles", "lr_max":
		return Snapshot
	case "pretrain_epochs", "pretrain_fraction", "pretrain_lr", "pretrain_schedule", "lr_1", "lr_2", "cycle":
		return FGE
	}
	return ""
}

// parseConfig splits params (as Config.Params carries them) into the
// ensemble's configuration and the member optimizer's hyperparameters
// (unprefixed), and validates what the ensemble itself can check: the enum
// and range tags of Config, and by hand what involves several fields.
func parseConfig(o Options, params map[string]any) (Config, map[string]any, error) {
	c := defaults()
	_, inner, own, err := o.Split("ensembles", params)
	if err != nil {
		return Config{}, nil, err
	}
	if err := hparams.Apply(&c, own); err != nil {
		return Config{}, nil, fmt.Errorf("ensembles: %w", err)
	}
	if c.Kind != Deep {
		if err := o.RequireSetLR("ensembles", fmt.Sprintf("kind %q", c.Kind), c.Member); err != nil {
			return Config{}, nil, err
		}
	}
	for _, s := range hparams.MustSpecs(defaults()) {
		if k := kindOf(s.Name); k != "" && k != c.Kind {
			if v, given := own[s.Name]; given && !compose.IsDefault(s, v) {
				return Config{}, nil, fmt.Errorf("ensembles: %s = %v is a %q parameter but kind = %q", s.Name, v, k, c.Kind)
			}
		}
	}
	if c.Kind == FGE && (c.Cycle < 2 || c.Cycle%2 != 0) {
		return Config{}, nil, fmt.Errorf("ensembles: fge cycle = %d: must be even and ≥ 2 (as fge.py asserts)", c.Cycle)
	}
	return c, inner, nil
}

// Ensemble is the optimizer. Create it with New.
type Ensemble struct {
	optim.Defaults
	opts Options
	cfg  Config
	h    optim.Host
	// lr is the host the member drives: the wrapper's SetLR goes in front
	// of its first program of a step whose rate the schedule sets.
	lr      *compose.LRHost
	hs      *optim.Handles
	inner   optim.Optimizer
	members int
	total   int64
	spe     int64
	// cycles is the number of snapshot cycles, capped at the run's steps.
	cycles int
	// pretrain is the number of FGE pretraining epochs and budget the
	// length in epochs of the schedule they follow.
	pretrain int64
	budget   float64
	// slots is the number of snapshots planned and snaps their vectors
	// (snaps[k] is snapshot k); taken lists the snapshots taken so far, in
	// order.
	slots int
	snaps []optim.Vec
	taken []int
}

var (
	_ optim.Optimizer = (*Ensemble)(nil)
	_ optim.Wrapper   = (*Ensemble)(nil)
)

// New returns an ensemble optimizer with the default hyperparameters whose
// members' steps are done by one of o.Members.
func New(o Options) optim.Optimizer {
	return &Ensemble{opts: o.Clone(), cfg: defaults()}
}

// Info implements optim.Optimizer. The schema is the ensemble's own
// hyperparameters followed by every member optimizer's, prefixed.
func (e *Ensemble) Info() optim.Info {
	return optim.Info{Name: "ensembles", Version: "0.1.0",
		Features: optim.Features{Members: true, MemberDataOrder: true, Predictive: true, State: true},
		Params:   append(hparams.MustSpecs(defaults()), e.opts.Prefixed()...)}
}

// Unwrap implements optim.Wrapper: the member optimizer that Configure
// made (nil before), e.g. to read the handles of its vectors.
func (e *Ensemble) Unwrap() optim.Optimizer { return e.inner }

// Configure implements optim.Optimizer: it configures the member optimizer
// and, for snapshot and FGE, allocates the snapshot vectors.
func (e *Ensemble) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	c, inner, err := parseConfig(e.opts, cfg.Params)
	if err != nil {
		return err
	}
	*e = Ensemble{opts: e.opts, cfg: c, h: h, lr: compose.NewLRHost(h), hs: cfg.Namespace("ensembles"),
		members: cfg.MemberCount(), total: cfg.TotalSteps, spe: cfg.StepsPerEpoch}
	if c.Kind != Deep {
		if err := e.plan(); err != nil {
			return err
		}
	}
	if j, _ := inner["joint"].(bool); j {
		return fmt.Errorf("ensembles: otmdr_joint = true trains the members as one model on shared batches, " +
			"but deep ensembles give every member its own data order: use plugin = \"otmdr\" with joint = true instead")
	}
	// The member allocates from a namespace inside the ensemble's
	// (ensembles/<its name>/…), so its handles never collide with the
	// snapshots. It takes its handles first, so that they are those of the
	// member's own plugin (a deep ensemble's programs and checkpoints are
	// the plugin's).
	opt, err := e.opts.NewMember(ctx, e.lr, "ensembles", c.Member, optim.Config{Params: inner, Seed: cfg.Seed,
		TotalSteps: cfg.TotalSteps, StepsPerEpoch: cfg.StepsPerEpoch, Members: cfg.Members, Handles: e.hs})
	if err != nil {
		return err
	}
	e.inner = opt
	if e.slots > 0 {
		e.snaps = make([]optim.Vec, e.slots)
		p := e.hs.Prog()
		for k := range e.snaps {
			e.snaps[k] = e.hs.New(fmt.Sprintf("snapshot[%d]", k))
			p.Alloc(e.snaps[k], 0)
		}
		if _, err := h.Exec(ctx, p); err != nil {
			return fmt.Errorf("ensembles: allocate %d snapshots: %w", e.slots, err)
		}
	}
	return nil
}

// plan checks a snapshot or FGE run's shape and works out its schedule.
func (e *Ensemble) plan() error {
	c := e.cfg
	switch {
	case e.members != 1:
		return fmt.Errorf("ensembles: kind %q trains one member and ensembles its snapshots; the run has %d "+
			"(use kind = \"deep\" for an ensemble of members)", c.Kind, e.members)
	case e.total < 1:
		return fmt.Errorf("ensembles: kind %q needs the run's total steps, got %d", c.Kind, e.total)
	}
	if c.Kind == Snapshot {
		e.cycles = int(min(int64(c.Cycles), e.total))
		e.slots = e.cycles
		return nil
	}
	if e.spe < 1 {
		return fmt.Errorf("ensembles: fge needs the steps per epoch, got %d", e.spe)
	}
	runEpochs := float64(e.total) / float64(e.spe)
	e.pretrain = int64(c.PretrainEpochs)
	if c.PretrainEpochs < 0 {
		e.pretrain = int64(math.Floor(c.PretrainFraction*runEpochs + 1e-9))
	}
	e.budget = runEpochs
	if c.PretrainSchedule == "pretrain" {
		e.budget = float64(e.pretrain)
	}
	fgeEpochs := max(e.total-e.pretrain*e.spe, 0) / e.spe
	e.slots = fgeSnapshots(fgeEpochs, c.Cycle)
	if e.slots == 0 {
		// As SWA refuses a run with nothing to average: the predictive
		// would be the pretrained model alone, recorded as an FGE.
		return fmt.Errorf("ensembles: fge: after %d epochs of pretraining the run has %d complete FGE epochs, and with cycle = %d the first snapshot needs %d: no snapshot would be taken, nothing ensembled (lower pretrain_epochs or pretrain_fraction, or train more epochs)",
			e.pretrain, fgeEpochs, c.Cycle, c.Cycle/2)
	}
	return nil
}

// Step implements optim.Optimizer. Deep ensembles are the member
// optimizer's step over all members; snapshot and FGE set the step's rate
// and take a snapshot when one is due. The metrics are the member
// optimizer's, plus "lr" for snapshot and FGE.
func (e *Ensemble) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	if e.inner == nil {
		return optim.StepOutput{}, errors.New("ensembles: step before configure")
	}
	if e.cfg.Kind == Deep {
		out, err := e.inner.Step(ctx, in)
		if err != nil {
			return out, fmt.Errorf("ensembles: %w", err)
		}
		return out, nil
	}
	lr, snap, err := e.schedule(in)
	if err != nil {
		return optim.StepOutput{}, err
	}
	in.LR = lr
	e.lr.Before(e.hs.Prog().SetLR(0, lr))
	out, err := e.inner.Step(ctx, in)
	if err != nil {
		return out, fmt.Errorf("ensembles: %w", err)
	}
	if snap >= 0 {
		if _, err := e.h.Exec(ctx, e.hs.Prog().CopyState(e.snaps[snap], optim.Params)); err != nil {
			return out, fmt.Errorf("ensembles: snapshot %d at step %d: %w", snap, in.Step, err)
		}
		e.taken = append(e.taken, snap)
	}
	if out.Metrics == nil {
		out.Metrics = map[string]float64{}
	}
	out.Metrics["lr"] = lr
	return out, nil
}

// schedule returns the step's rate and the index of the snapshot due after
// it (-1 for none).
func (e *Ensemble) schedule(in optim.StepInput) (float64, int, error) {
	if in.Step < 0 || in.Step >= e.total {
		return 0, -1, fmt.Errorf("ensembles: step %d outside the run's %d steps", in.Step, e.total)
	}
	c := e.cfg
	if c.Kind == Snapshot {
		cycle, tCur, tCycle := SnapshotCycle(in.Step, e.total, e.cycles)
		alpha0 := c.LRMax
		if alpha0 == 0 {
			alpha0 = in.LR
		}
		snap := -1
		if tCur == tCycle {
			snap = cycle
		}
		return SnapshotLR(alpha0, tCur, tCycle), snap, nil
	}
	epoch := int64(in.Epoch)
	i := in.Step - epoch*e.spe
	if epoch < 0 || i < 0 || i >= e.spe {
		return 0, -1, fmt.Errorf("ensembles: step %d is not in epoch %d of %d steps", in.Step, in.Epoch, e.spe)
	}
	if epoch < e.pretrain {
		base := c.PretrainLR
		if base == 0 {
			base = in.LR
		}
		return base * FGEPretrainFactor(float64(epoch+1)/e.budget), -1, nil
	}
	k := epoch - e.pretrain
	lr := FGECyclicLR(c.LR1, c.LR2, FGEPosition(k, i, e.spe, c.Cycle))
	if i != e.spe-1 || !FGESnapshotEpoch(k, c.Cycle) {
		return lr, -1, nil
	}
	snap := int(k / int64(c.Cycle))
	if snap >= e.slots {
		return 0, -1, fmt.Errorf("ensembles: snapshot %d at step %d, but %d were planned", snap, in.Step, e.slots)
	}
	return lr, snap, nil
}

// Snapshots returns the handles of the snapshots taken so far, in order.
func (e *Ensemble) Snapshots() []optim.Vec {
	vecs := make([]optim.Vec, len(e.taken))
	for i, k := range e.taken {
		vecs[i] = e.Snapshot(k)
	}
	return vecs
}

// Snapshot returns the handle of snapshot k (named ensembles/snapshot[k]),
// taken or not. It is valid after Configure, for k below the number of
// snapshots the run plans.
func (e *Ensemble) Snapshot(k int) optim.Vec { return e.snaps[k] }

// Predictive implements optim.Optimizer (Features.Predictive): for deep ensembles the member
// optimizer's predictive, else the average of the members' probabilities;
// for snapshot and FGE the average over the snapshots (the live parameters
// before the first one).
func (e *Ensemble) Predictive(ctx context.Context) (optim.Predictive, error) {
	if e.inner == nil {
		return optim.Predictive{}, errors.New("ensembles: predictive before configure")
	}
	if e.cfg.Kind == Deep {
		pred, err := compose.Predictive(ctx, e.inner, e.members)
		if err != nil {
			return pred, fmt.Errorf("ensembles: %w", err)
		}
		return pred, nil
	}
	if len(e.taken) == 0 {
		return optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.Params}}, nil
	}
	return optim.Predictive{Kind: optim.Members, Vecs: e.Snapshots()}, nil
}

// Resolved implements optim.Optimizer: pretrain_epochs for fge with -1, the
// epochs that floor(pretrain_fraction × run epochs) gave, and what the
// member optimizer resolved, under its prefixed names
// (otmdr_rho2). Nil before Configure.
func (e *Ensemble) Resolved() map[string]any {
	if e.inner == nil {
		return nil
	}
	var own map[string]any
	if e.cfg.Kind == FGE && e.cfg.PretrainEpochs < 0 {
		own = map[string]any{"pretrain_epochs": e.pretrain}
	}
	return compose.Resolved(own, e.cfg.Member, e.inner)
}

// state is the checkpointed blob.
type state struct {
	Version int    `json:"version"`
	Kind    string `json:"kind"`
	Member  string `json:"member"`
	// Taken lists the snapshots taken, in order.
	Taken []int `json:"taken"`
	// Inner is the member optimizer's blob.
	Inner []byte `json:"inner"`
}

// SaveState implements optim.Optimizer (Features.State). The vectors are the member
// optimizer's and the snapshots taken; the blob holds which snapshots were
// taken and the member optimizer's blob.
func (e *Ensemble) SaveState(ctx context.Context) ([]byte, []optim.Vec, error) {
	if e.inner == nil {
		return nil, nil, errors.New("ensembles: save state before configure")
	}
	s := state{Version: 1, Kind: e.cfg.Kind, Member: e.cfg.Member, Taken: slices.Clone(e.taken)}
	inner, vecs, err := e.inner.SaveState(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("ensembles: save state: %s: %w", e.cfg.Member, err)
	}
	s.Inner = inner
	b, err := json.Marshal(s)
	if err != nil {
		return nil, nil, fmt.Errorf("ensembles: save state: %w", err)
	}
	return b, append(vecs, e.Snapshots()...), nil
}

// LoadState implements optim.Optimizer (Features.State), after Configure: the host has
// restored the vectors' contents into the handles Configure allocated.
func (e *Ensemble) LoadState(ctx context.Context, blob []byte) error {
	if e.inner == nil {
		return errors.New("ensembles: load state before configure")
	}
	var s state
	if err := json.Unmarshal(blob, &s); err != nil {
		return fmt.Errorf("ensembles: load state: %w", err)
	}
	switch {
	case s.Version != 1:
		return fmt.Errorf("ensembles: load state: unsupported version %d", s.Version)
	case s.Kind != e.cfg.Kind || s.Member != e.cfg.Member:
		return fmt.Errorf("ensembles: load state: saved by kind %q member %q, configured as kind %q member %q",
			s.Kind, s.Member, e.cfg.Kind, e.cfg.Member)
	}
	seen := map[int]bool{}
	for _, k := range s.Taken {
		if k < 0 || k >= e.slots || seen[k] {
			return fmt.Errorf("ensembles: load state: snapshots %v do not fit the %d planned", s.Taken, e.slots)
		}
		seen[k] = true
	}
	if err := e.inner.LoadState(ctx, s.Inner); err != nil {
		return fmt.Errorf("ensembles: load state: %s: %w", e.cfg.Member, err)
	}
	e.taken = slices.Clone(s.Taken)
	return nil
}

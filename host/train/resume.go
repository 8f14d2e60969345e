package train

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/checkpoint/statedict"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/identity"
	"github.com/optlab/optlab/host/observe"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/sdk/optim"
)

// loopState is the training loop's own state at an epoch boundary.
type loopState struct {
	Epoch     int     `json:"epoch"` // epochs finished
	Step      int64   `json:"step"`
	TrainLoss float64 `json:"train_loss"`
	TrainAcc  float64 `json:"train_acc"`
	// GradEvals is the gradient evaluations so far (samples of
	// forward-backward passes, engine.Counters.GradSamples), over every
	// resumption.
	GradEvals int64     `json:"grad_evals,omitempty"`
	Elapsed   float64   `json:"elapsed_seconds"`
	Orders    [][]byte  `json:"orders"` // data-order PCG states
	Aug       []byte    `json:"aug"`    // augmentation PCG state
	Sched     schedSave `json:"schedule"`
	Plugin    []byte    `json:"plugin_blob,omitempty"`
	Vecs      []int32   `json:"plugin_vecs,omitempty"`
	// Best is the best epoch so far (eval.best_epoch).
	Best *bestEpoch `json:"best,omitempty"`
	// EvalSeconds is the wall-clock time spent in the evaluations at
	// epoch ends so far, and Evals what they measured
	// (results.Record.Evals).
	EvalSeconds float64             `json:"eval_seconds,omitempty"`
	Evals       []results.EvalPoint `json:"evals,omitempty"`
}

type schedSave struct {
	Scale     float64 `json:"scale"`
	Best      float64 `json:"best"`
	HasBest   bool    `json:"has_best"` // Best is +Inf until the first observation
	BadEpochs int     `json:"bad_epochs"`
}

// statePath is where run's resumable training state lives ("" without
// Checkpoints).
func (r *Runner) statePath(run experiment.Run) string {
	if r.Checkpoints == nil {
		return ""
	}
	return r.Checkpoints.State(run.Key)
}

// resume prepares the loop of a built run: the schedule and the random
// streams of the data orders and the augmentations; when the run has a
// saved training state (made with the run's configuration; one made with
// another is moved aside), it restores them and the engine's and the
// optimizer's state from it, and the loop continues after its epoch. Then
// it opens the run's observers.
func (r *Runner) resume(ctx context.Context, t *training) error {
	t.sched = NewSchedule(r.Exp.Train)
	t.orders = 1
	if t.m.Optimizer.Info().Features.MemberDataOrder {
		t.orders = t.members
	}
	t.rngs = make([]*rand.Rand, t.orders)
	t.srcs = make([]*rand.PCG, t.orders)
	for k := range t.rngs {
		t.srcs[k] = rand.NewPCG(uint64(t.run.Seed), uint64(1+2*k))
		t.rngs[k] = rand.New(t.srcs[k])
	}
	t.augSrc = rand.NewPCG(uint64(t.run.Seed), 2)
	t.augRNG = rand.New(t.augSrc)
	t.statePath = r.statePath(t.run)
	if err := r.retireStaleState(t.run, t.statePath, t.cfg); err != nil {
		return err
	}
	ls, resumed, err := r.loadState(ctx, t)
	if err != nil {
		return err
	}
	t.from = ls
	t.best = ls.Best
	t.evalSeconds, t.evals = ls.EvalSeconds, ls.Evals
	t.step, t.epochs, t.trainLoss, t.trainAcc = ls.Step, ls.Epoch, ls.TrainLoss, ls.TrainAcc
	t.obs, err = observe.Open(r.Observers, observe.Start{Run: t.run, Resumed: resumed, StatePath: t.statePath,
		FromEpoch: ls.Epoch, FromStep: ls.Step, TotalSteps: t.total, Epochs: r.Exp.Train.Horizon()})
	return err
}

// saveState writes the training state at the end of an epoch: the engine's
// (saveEngineState), the optimizer's, and the loop's ls with the random
// streams and the schedule.
func (r *Runner) saveState(ctx context.Context, t *training, ls loopState) error {
	var vecs []optim.Vec
	if opt := t.m.Optimizer; opt.Info().Features.State {
		blob, v, err := opt.SaveState(ctx)
		if err != nil {
			return fmt.Errorf("optimizer state: %w", err)
		}
		ls.Plugin, vecs = blob, v
		for _, h := range v {
			ls.Vecs = append(ls.Vecs, int32(h))
		}
	}
	for _, s := range t.srcs {
		b, err := s.MarshalBinary()
		if err != nil {
			return err
		}
		ls.Orders = append(ls.Orders, b)
	}
	b, err := t.augSrc.MarshalBinary()
	if err != nil {
		return err
	}
	ls.Aug = b
	ls.Sched = schedSave{Scale: t.sched.scale, BadEpochs: t.sched.badEpochs}
	if !math.IsInf(t.sched.best, 1) {
		ls.Sched.Best, ls.Sched.HasBest = t.sched.best, true
	}
	ts, meta, err := saveEngineState(ctx, t.eng, vecs)
	if err != nil {
		return err
	}
	j, err := json.Marshal(ls)
	if err != nil {
		return err
	}
	meta["optlab.loop"] = base64.StdEncoding.EncodeToString(j)
	c, err := json.Marshal(t.cfg)
	if err != nil {
		return err
	}
	meta[metaConfig] = string(c)
	meta[metaIdentity] = strconv.Itoa(identity.Version)
	if err := results.MkdirIn(r.Checkpoints.Dir, filepath.Dir(t.statePath)); err != nil {
		return err
	}
	return checkpoint.Write(t.statePath, ts, meta)
}

// saveModel writes the run's final model to its checkpoint when the runner
// keeps files: what its predictive evaluates (statedict.SavePredictive:
// an SWA average with its recomputed BatchNorm statistics, a snapshot
// ensemble's snapshots, …), with PyTorch names. It removes the training
// state, which is no longer needed.
func (r *Runner) saveModel(ctx context.Context, t *training) error {
	if r.Checkpoints == nil {
		return nil
	}
	p := r.Checkpoints.Model(t.run.Key)
	if err := results.MkdirIn(r.Checkpoints.Dir, filepath.Dir(p)); err != nil {
		return err
	}
	pred, err := r.predictive(ctx, t)
	if err != nil {
		return fmt.Errorf("saving the final model: %w", err)
	}
	if err := statedict.SavePredictive(ctx, t.eng, pred, p, map[string]string{"run_key": t.run.Key, "experiment": r.Exp.Name}); err != nil {
		return fmt.Errorf("saving the final model: %w", err)
	}
	if t.statePath != "" {
		_ = os.Remove(t.statePath)
	}
	return nil
}

// metaConfig is the training-state metadata key holding the run's
// configuration (its record's Config, as JSON).
const metaConfig = "optlab.config"

// metaIdentity is the training-state metadata key holding the identity
// version of its metaConfig (identity.Version); states saved before
// versions were recorded lack it (version 1).
const metaIdentity = "optlab.identity"

// retireStaleState moves run's saved training state aside when it was saved
// with another configuration than cfg (the experiment was edited since), so
// that the run starts over instead of resuming someone else's training, and
// says what changed. States without a saved configuration (older optlab)
// are left to resume.
func (r *Runner) retireStaleState(run experiment.Run, path string, cfg map[string]any) error {
	if path == "" {
		return nil
	}
	meta, err := checkpoint.ReadMeta(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("resuming: %w", err)
	}
	saved, ok := meta[metaConfig]
	if !ok {
		return nil
	}
	var old map[string]any
	if err := json.Unmarshal([]byte(saved), &old); err != nil {
		return fmt.Errorf("resuming from %s: configuration: %w", path, err)
	}
	version := 0
	if v, ok := meta[metaIdentity]; ok {
		if version, err = strconv.Atoi(v); err != nil {
			return fmt.Errorf("resuming from %s: identity version: %w", path, err)
		}
	}
	if old, err = identity.Migrate(old, version); err != nil {
		return fmt.Errorf("resuming from %s: %w", path, err)
	}
	diff := results.ConfigDiff(old, cfg)
	if len(diff) == 0 {
		return nil
	}
	dst, err := r.Checkpoints.KeepAside(path)
	if err != nil {
		return err
	}
	if r.Log != nil {
		fmt.Fprintf(r.Log, "host: %s: not resuming its saved state: the experiment changed since (%s); state moved to %s; training from the start\n",
			run.Key, strings.Join(diff, "; "), dst)
	}
	return nil
}

// loadState restores a run from its training state; ok is false when there
// is none. The optimizer must be configured already.
func (r *Runner) loadState(ctx context.Context, t *training) (loopState, bool, error) {
	path := t.statePath
	var ls loopState
	if path == "" {
		return ls, false, nil
	}
	ts, meta, err := checkpoint.Read(path)
	if errors.Is(err, os.ErrNotExist) {
		return ls, false, nil
	}
	if err != nil {
		return ls, false, fmt.Errorf("resuming: %w", err)
	}
	j, err := base64.StdEncoding.DecodeString(meta["optlab.loop"])
	if err == nil {
		err = json.Unmarshal(j, &ls)
	}
	if err != nil {
		return ls, false, fmt.Errorf("resuming from %s: loop state: %w", path, err)
	}
	if len(ls.Orders) != len(t.srcs) {
		return ls, false, fmt.Errorf("resuming from %s: %d data orders saved, %d now", path, len(ls.Orders), len(t.srcs))
	}
	if err := loadEngineState(ctx, t.eng, ts, meta); err != nil {
		return ls, false, fmt.Errorf("resuming from %s: %w", path, err)
	}
	if opt := t.m.Optimizer; opt.Info().Features.State {
		if err := opt.LoadState(ctx, ls.Plugin); err != nil {
			return ls, false, fmt.Errorf("resuming from %s: optimizer state: %w", path, err)
		}
	}
	for i, s := range t.srcs {
		if err := s.UnmarshalBinary(ls.Orders[i]); err != nil {
			return ls, false, err
		}
	}
	if err := t.augSrc.UnmarshalBinary(ls.Aug); err != nil {
		return ls, false, err
	}
	t.sched.scale, t.sched.badEpochs = ls.Sched.Scale, ls.Sched.BadEpochs
	if ls.Sched.HasBest {
		t.sched.best = ls.Sched.Best
	}
	return ls, true, nil
}

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
	"strings"
	"time"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/sdk/optim"
)

// loopState is the training loop's own state at an epoch boundary.
type loopState struct {
	Epoch     int       `json:"epoch"` // epochs finished
	Step      int64     `json:"step"`
	TrainLoss float64   `json:"train_loss"`
	TrainAcc  float64   `json:"train_acc"`
	Elapsed   float64   `json:"elapsed_seconds"`
	Orders    [][]byte  `json:"orders"` // data-order PCG states
	Aug       []byte    `json:"aug"`    // augmentation PCG state
	Sched     schedSave `json:"schedule"`
	Plugin    []byte    `json:"plugin_blob,omitempty"`
	Vecs      []int32   `json:"plugin_vecs,omitempty"`
}

type schedSave struct {
	Scale     float64 `json:"scale"`
	Best      float64 `json:"best"`
	HasBest   bool    `json:"has_best"` // Best is +Inf until the first observation
	BadEpochs int     `json:"bad_epochs"`
}

// StatePath is where run's resumable training state lives.
func (r *Runner) StatePath(run experiment.Run) string {
	if r.StateDir == "" {
		return ""
	}
	return filepath.Join(r.StateDir, results.KeyFileStem(run.Key)+".safetensors")
}

// ModelPath is where run's final model checkpoint goes.
func (r *Runner) ModelPath(run experiment.Run) string {
	if r.StateDir == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(r.StateDir), ModelFile(run.Key))
}

// ModelFile is the final model of run key, relative to the experiment's
// results folder.
func ModelFile(key string) string {
	return filepath.Join("checkpoints", results.KeyFileStem(key)+".safetensors")
}

// KeepAside moves the file rel of an experiment's results folder dir (if it
// exists) to dir/superseded/rel with the time appended to its name, where a
// run's files go when its configuration changed; it returns the new path,
// or "" when there was no file.
func KeepAside(dir, rel string) (string, error) {
	src := filepath.Join(dir, rel)
	if _, err := os.Stat(src); err != nil {
		return "", nil
	}
	dst := filepath.Join(dir, SupersededDir, rel+"."+time.Now().UTC().Format("20060102T150405Z"))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(src, dst); err != nil {
		return "", fmt.Errorf("keeping the old %s aside: %w", rel, err)
	}
	return dst, nil
}

// saveState writes the training state at the end of an epoch.
func (r *Runner) saveState(ctx context.Context, path string, cfg map[string]any, eng *engine.Engine, opt optim.Optimizer, ls loopState, srcs []*rand.PCG, aug *rand.PCG, sched *Schedule) error {
	var vecs []optim.Vec
	if st, ok := opt.(optim.Stateful); ok {
		blob, v, err := st.SaveState(ctx)
		if err != nil {
			return fmt.Errorf("optimizer state: %w", err)
		}
		ls.Plugin, vecs = blob, v
		for _, h := range v {
			ls.Vecs = append(ls.Vecs, int32(h))
		}
	}
	for _, s := range srcs {
		b, err := s.MarshalBinary()
		if err != nil {
			return err
		}
		ls.Orders = append(ls.Orders, b)
	}
	b, err := aug.MarshalBinary()
	if err != nil {
		return err
	}
	ls.Aug = b
	ls.Sched = schedSave{Scale: sched.scale, BadEpochs: sched.badEpochs}
	if !math.IsInf(sched.best, 1) {
		ls.Sched.Best, ls.Sched.HasBest = sched.best, true
	}
	ts, meta, err := saveEngineState(ctx, eng, vecs)
	if err != nil {
		return err
	}
	j, err := json.Marshal(ls)
	if err != nil {
		return err
	}
	meta["optlab.loop"] = base64.StdEncoding.EncodeToString(j)
	c, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	meta[metaConfig] = string(c)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return checkpoint.Write(path, ts, meta)
}

// metaConfig is the training-state metadata key holding the run's
// configuration (its record's Config, as JSON).
const metaConfig = "optlab.config"

// SupersededDir is the folder, inside results/<experiment>/, where the
// records and files of runs whose configuration was changed are kept.
const SupersededDir = "superseded"

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
	diff := results.ConfigDiff(old, cfg)
	if len(diff) == 0 {
		return nil
	}
	dir := filepath.Dir(r.StateDir)
	dst, err := KeepAside(dir, filepath.Join(filepath.Base(r.StateDir), filepath.Base(path)))
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
func (r *Runner) loadState(ctx context.Context, path string, eng *engine.Engine, opt optim.Optimizer, srcs []*rand.PCG, aug *rand.PCG, sched *Schedule) (loopState, bool, error) {
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
	if len(ls.Orders) != len(srcs) {
		return ls, false, fmt.Errorf("resuming from %s: %d data orders saved, %d now", path, len(ls.Orders), len(srcs))
	}
	if err := loadEngineState(ctx, eng, ts, meta); err != nil {
		return ls, false, fmt.Errorf("resuming from %s: %w", path, err)
	}
	if st, ok := opt.(optim.Stateful); ok {
		if err := st.LoadState(ctx, ls.Plugin); err != nil {
			return ls, false, fmt.Errorf("resuming from %s: optimizer state: %w", path, err)
		}
	}
	for i, s := range srcs {
		if err := s.UnmarshalBinary(ls.Orders[i]); err != nil {
			return ls, false, err
		}
	}
	if err := aug.UnmarshalBinary(ls.Aug); err != nil {
		return ls, false, err
	}
	sched.scale, sched.badEpochs = ls.Sched.Scale, ls.Sched.BadEpochs
	if ls.Sched.HasBest {
		sched.best = ls.Sched.Best
	}
	return ls, true, nil
}

package train

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/optlab/optlab/host/checkpoint/statedict"
	"github.com/optlab/optlab/host/results"
)

// MetaStepsDone is the metadata key of a parameter dump (train
// .dump_params_every) that holds the number of optimizer steps done when
// it was written: k for the dump after step k, 0 for the one before the
// first step. (The "optlab.step" of statedict.Save is the 0-based index of
// the last step begun, which does not tell those two apart.)
const MetaStepsDone = "optlab.steps_done"

// dumping reports whether the run writes parameter dumps.
func (r *Runner) dumping() bool {
	return r.Dumps != nil && r.Exp.Train.DumpParamsEvery > 0
}

// startDumps prepares a run's parameter dumps when it writes them: a run
// that starts from its first step (not a resumed one) removes the dumps an
// earlier attempt left and writes the parameters it starts from (step 0).
func (r *Runner) startDumps(ctx context.Context, t *training) error {
	if !r.dumping() || t.step != 0 {
		return nil
	}
	// Its folder must be a folder of the results folder, not a link out.
	if err := results.MkdirIn(r.Dumps.Dir, r.Dumps.Params(t.run.Key)); err != nil {
		return fmt.Errorf("parameter dumps: %w", err)
	}
	if err := os.RemoveAll(r.Dumps.Params(t.run.Key)); err != nil {
		return fmt.Errorf("parameter dumps: removing an earlier attempt's: %w", err)
	}
	return r.dumpParams(ctx, t)
}

// dumpAfterStep writes the parameters after the step just done when the
// run dumps them and the number of steps done is a multiple of
// train.dump_params_every.
func (r *Runner) dumpAfterStep(ctx context.Context, t *training) error {
	if !r.dumping() || t.step%int64(r.Exp.Train.DumpParamsEvery) != 0 {
		return nil
	}
	return r.dumpParams(ctx, t)
}

// dumpParams writes every member's live parameters and BatchNorm
// statistics (num_batches_tracked included) after t.step steps as a
// PyTorch state dict (statedict.Save, the names of a final model of a
// point predictive) to the run's folder of dumps. It reads the engine's
// vectors and nothing else: the run trains the same steps with or without
// it.
func (r *Runner) dumpParams(ctx context.Context, t *training) error {
	path := r.Dumps.ParamsStep(t.run.Key, t.step)
	if err := results.MkdirIn(r.Dumps.Dir, r.Dumps.Params(t.run.Key)); err != nil {
		return fmt.Errorf("parameter dump after step %d: %w", t.step, err)
	}
	meta := map[string]string{"run_key": t.run.Key, "experiment": r.Exp.Name, MetaStepsDone: strconv.FormatInt(t.step, 10)}
	if err := statedict.Save(ctx, t.eng, path, meta); err != nil {
		return fmt.Errorf("parameter dump after step %d: %w", t.step, err)
	}
	return nil
}

package experiment

import (
	"errors"
	"fmt"
	"strings"

	"github.com/optlab/optlab/host/data"
)

// CheckSplit checks the keys of e that need the loaded data sp to be
// checked, which Validate cannot do for dataset npz (for the other
// datasets it already has): eval.temperature = "validation" and
// eval.best_epoch need a validation split; [eval.corruptions] needs a test
// set of 8-bit images (uint8 C×H×W); model.memory_format = "channels_last"
// needs images. The host calls it once the data is loaded, before
// training.
func CheckSplit(e *Experiment, sp data.Split) error {
	var problems []string
	if sp.Val == nil {
		if e.Eval.Temperature == TemperatureValidation {
			problems = append(problems, "eval.temperature = \"validation\" needs a validation split: set data.validation > 0 (or give x_val and y_val in an npz file)")
		}
		if e.Eval.BestEpoch != "" {
			problems = append(problems, "eval.best_epoch needs a validation split to choose on: set data.validation > 0 (or give x_val and y_val in an npz file)")
		}
	}
	if t := sp.Test; e.Eval.Corruptions.Active() && t != nil && (!t.Raw8() || len(t.Shape) != 3) {
		kind := "float"
		if t.Raw8() {
			kind = "uint8"
		}
		problems = append(problems, fmt.Sprintf("eval.corruptions needs 8-bit images (uint8 C×H×W samples); the test samples of %q are %s of shape %v", e.Data.Dataset, kind, t.Shape))
	}
	if tr := sp.Train; e.Model.MemoryFormat == MemoryChannelsLast && tr != nil && len(tr.Shape) != 3 {
		problems = append(problems, fmt.Sprintf("model.memory_format = \"channels_last\" needs image inputs (C×H×W), but the samples of %q have shape %v; use %q", e.Data.Dataset, tr.Shape, MemoryContiguous))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

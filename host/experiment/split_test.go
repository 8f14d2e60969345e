package experiment

import (
	"strings"
	"testing"

	"github.com/optlab/optlab/host/data"
)

// TestCheckSplit: the keys only the loaded data can check are refused with
// the key and what the data is.
func TestCheckSplit(t *testing.T) {
	images := &data.Set{Name: "i", Shape: []int{1, 2, 2}, Classes: 2, X: make([]uint8, 4), Y: []int32{0}}
	floats := &data.Set{Name: "f", Shape: []int{3, 2, 2}, Classes: 2, F: make([]float32, 12), Y: []int32{0}}
	vectors := &data.Set{Name: "v", Shape: []int{4}, Classes: 2, F: make([]float32, 4), Y: []int32{0}}
	tests := []struct {
		name string
		edit func(e *Experiment)
		sp   data.Split
		want []string // substrings of the error; none: no error
	}{
		{name: "defaults", sp: data.Split{Train: vectors, Test: vectors}},
		{name: "temperature needs validation", edit: func(e *Experiment) { e.Eval.Temperature = TemperatureValidation }, sp: data.Split{Train: vectors, Test: vectors},
			want: []string{`eval.temperature = "validation" needs a validation split: set data.validation > 0 (or give x_val and y_val in an npz file)`}},
		{name: "temperature with validation", edit: func(e *Experiment) { e.Eval.Temperature = TemperatureValidation }, sp: data.Split{Train: vectors, Test: vectors, Val: vectors}},
		{name: "best epoch needs validation", edit: func(e *Experiment) { e.Eval.BestEpoch = BestAcc }, sp: data.Split{Train: vectors, Test: vectors},
			want: []string{"eval.best_epoch needs a validation split"}},
		{name: "corruptions on images", edit: func(e *Experiment) { e.Eval.Corruptions.Families = []string{"all"} }, sp: data.Split{Train: images, Test: images}},
		{name: "corruptions need 8-bit images", edit: func(e *Experiment) {
			e.Data.Dataset = DatasetNumPy
			e.Eval.Corruptions.Families = []string{"all"}
		}, sp: data.Split{Train: floats, Test: floats}, want: []string{`eval.corruptions needs 8-bit images (uint8 C×H×W samples); the test samples of "npz" are float of shape [3 2 2]`}},
		{name: "channels_last on float images", edit: func(e *Experiment) { e.Model.MemoryFormat = MemoryChannelsLast }, sp: data.Split{Train: floats, Test: floats}},
		{name: "everything at once", edit: func(e *Experiment) {
			e.Eval.Temperature = TemperatureValidation
			e.Eval.Corruptions.Families = []string{"jpeg"}
			e.Model.MemoryFormat = MemoryChannelsLast
		}, sp: data.Split{Train: vectors, Test: vectors}, want: []string{
			`eval.temperature = "validation" needs a validation split`,
			"; eval.corruptions needs 8-bit images",
			`; model.memory_format = "channels_last" needs image inputs (C×H×W), but the samples of "uci-digits" have shape [4]; use "contiguous"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := Default()
			if tc.edit != nil {
				tc.edit(e)
			}
			err := CheckSplit(e, tc.sp)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

package train

import (
	"context"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/sgd"
)

// Every record carries the determinism and precision switches; the
// configuration has them only when on, so a run at the defaults keeps its
// configuration hash; a run applies them to libtorch before it trains.
func TestNumericsRecordedAndApplied(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	defer func() { _ = tensor.SetNumerics(tensor.Numerics{}) }()
	for _, c := range []struct {
		set  string
		want results.Numerics
	}{
		{"", results.Numerics{}},
		{"deterministic = true\ntf32 = true\nspill = true\n", results.Numerics{Deterministic: true, TF32: true}},
		{"cudnn_benchmark = true\n", results.Numerics{CudnnBenchmark: true}},
	} {
		src := strings.Replace(digitsTOML, "threads = 2\n", "threads = 2\n"+c.set, 1)
		r, exp := newRunner(t, w, src)
		run := experiment.Grid(exp)[0]
		m := method(t, sgd.New(), nil)
		rec := r.Record(run, m)
		if rec.Numerics == nil || *rec.Numerics != c.want {
			t.Errorf("%q: record numerics %+v, want %+v", c.set, rec.Numerics, c.want)
		}
		on := map[string]bool{"train.deterministic": c.want.Deterministic, "train.cudnn_benchmark": c.want.CudnnBenchmark, "train.tf32": c.want.TF32}
		for k, want := range on {
			v, ok := rec.Config[k]
			if ok != want || (ok && v != true) {
				t.Errorf("%q: config %s = %v (present %v), want present only when on", c.set, k, v, ok)
			}
		}
		if _, ok := rec.Config["train.spill"]; ok {
			t.Errorf("%q: train.spill is in the configuration", c.set)
		}
		if err := r.Preflight(context.Background(), run, m); err != nil {
			t.Fatal(err)
		}
		got, err := tensor.CurrentNumerics()
		if err != nil {
			t.Fatal(err)
		}
		if got != (tensor.Numerics{Deterministic: c.want.Deterministic, CudnnBenchmark: c.want.CudnnBenchmark, TF32: c.want.TF32}) {
			t.Errorf("%q: libtorch's switches after building the run: %v", c.set, got)
		}
	}
}

// TestChannelsLastRefusedWhenUnsound: a channels_last run starts only where
// tensor.ChannelsLastSound finds this libtorch's channels_last convolutions
// right (Debian 13's libtorch 2.6 gets one 12 % wrong on some CPUs), and
// is refused with its message where it does not.
func TestChannelsLastRefusedWhenUnsound(t *testing.T) {
	w := tensor.NewWorker(0)
	defer w.Close()
	sound := w.Do(context.Background(), func() error { return tensor.ChannelsLastSound(tensor.CPU) })
	r, exp := newRunner(t, w, digitsTOML)
	exp.Model.MemoryFormat = experiment.MemoryChannelsLast
	err := r.Preflight(context.Background(), experiment.Grid(exp)[0], method(t, sgd.New(), nil))
	switch {
	case sound == nil && err != nil:
		t.Fatalf("channels_last refused on a libtorch that computes it right: %v", err)
	case sound != nil && (err == nil || !strings.Contains(err.Error(), `model.memory_format = "channels_last": this libtorch`)):
		t.Fatalf("libtorch's channels_last is unsound (%v), but the run was not refused with it: %v", sound, err)
	case sound != nil:
		t.Logf("refused: %v", err)
	}
}

package train

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/sgd"
)

// TestDumpParams: train.dump_params_every writes the parameters before the
// first step and after every N-th (issue 39) without changing the run: a
// run with dumps ends bitwise where one without ends, with the same record
// and configuration (the setting is not part of the run's identity); the
// dump after step k holds what a run with max_steps = k saves as its final
// model, BatchNorm statistics and num_batches_tracked included, and
// num_batches_tracked is the number of steps (SGD's one pass per step
// updates the statistics).
func TestDumpParams(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	ctx := context.Background()
	r, exp := newRunner(t, w, strings.Replace(digitsTOML, "epochs = 3", "epochs = 2", 1))
	run := experiment.Grid(exp)[0]
	dir := t.TempDir()
	train := func(name string, every, maxSteps int) (results.Record, results.Layout) {
		t.Helper()
		l := results.Layout{Dir: filepath.Join(dir, name)}
		exp.Train.DumpParamsEvery, exp.Train.MaxSteps = every, maxSteps
		r.Checkpoints, r.Dumps = &l, &l
		rec, err := r.Run(ctx, run, method(t, sgd.New(), nil))
		if err != nil {
			t.Fatal(err)
		}
		return rec, l
	}
	const every = 5
	plain, plainDir := train("plain", 0, 0)
	dumped, dumpDir := train("dumped", every, 0)

	if diff := results.ConfigDiff(plain.Config, dumped.Config); len(diff) > 0 || plain.Identity != dumped.Identity {
		t.Errorf("the dumps change the run's configuration: %v", diff)
	}
	for k, v := range plain.Metrics {
		if dumped.Metrics[k] != v {
			t.Errorf("%s: %v with dumps, %v without", k, dumped.Metrics[k], v)
		}
	}
	sameTensors(t, plainDir.Model(run.Key), dumpDir.Model(run.Key))
	if _, err := os.Stat(plainDir.Params(run.Key)); !os.IsNotExist(err) {
		t.Errorf("a run without dump_params_every made %s (%v)", plainDir.Params(run.Key), err)
	}

	entries, err := os.ReadDir(dumpDir.Params(run.Key))
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	for k := int64(0); k <= plain.Steps; k += every {
		want = append(want, results.ParamsStepFile(k))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("dumps %v, want %v (every %d of %d steps, and step 0)", got, want, every, plain.Steps)
	}
	for i := range want {
		k := int64(i * every)
		path := dumpDir.ParamsStep(run.Key, k)
		ts, meta, err := checkpoint.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		if meta[MetaStepsDone] != strconv.FormatInt(k, 10) || meta["run_key"] != run.Key {
			t.Errorf("%s: metadata %v", path, meta)
		}
		n := 0
		for name, c := range ts {
			if strings.HasSuffix(name, ".num_batches_tracked") {
				n++
				if len(c.I64) != 1 || c.I64[0] != k {
					t.Errorf("%s: %s = %v, want %d", path, name, c.I64, k)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s has no num_batches_tracked", path)
		}
	}
	// Within the first epoch and after the second's third step.
	perEpoch := plain.Steps / 2
	for _, k := range []int64{every, (perEpoch/every + 1) * every} {
		_, l := train("max_steps_"+strconv.FormatInt(k, 10), 0, int(k))
		sameTensors(t, l.Model(run.Key), dumpDir.ParamsStep(run.Key, k))
	}
}

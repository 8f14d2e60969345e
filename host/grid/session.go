package grid

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/tensor"
)

// Session is what the runs of an experiment share in this process: the
// torch worker (train.threads threads), the device and, once uploaded, the
// data on it. Close it when done.
type Session struct {
	Exp  *experiment.Experiment
	W    *tensor.Worker
	Dev  tensor.Device
	Data *devset.Data // nil until Upload
	// loaded are the data settings Data was loaded with.
	loaded experiment.Data
}

// Open starts a session for exp on its train.device.
func Open(ctx context.Context, exp *experiment.Experiment) (*Session, error) {
	s := start(exp)
	if err := s.openDevice(ctx); err != nil {
		s.W.Close()
		return nil, err
	}
	return s, nil
}

// start starts the worker of a session for exp, with its train.threads;
// the device is openDevice's.
func start(exp *experiment.Experiment) *Session {
	return &Session{Exp: exp, W: tensor.NewWorker(exp.Train.Threads)}
}

// openDevice sets Dev to the experiment's train.device, parsed (and, for
// auto, chosen) on the worker.
func (s *Session) openDevice(ctx context.Context) error {
	return s.W.Do(ctx, func() (err error) { s.Dev, err = tensor.ParseDevice(s.Exp.Train.Device); return err })
}

// Describe is the session's one-line summary: libtorch, the device, torch's
// threads and the BLAS in use.
func (s *Session) Describe(ctx context.Context) string {
	n := 0
	_ = s.W.Do(ctx, func() error { n = tensor.Threads(); return nil })
	return fmt.Sprintf("%s on %s (%d torch threads; %s)", tensor.LibtorchDescription(), s.Dev, n, tensor.BLASDescription())
}

// DeviceNote says how train.device = "auto" chose, or "".
func (s *Session) DeviceNote() string { return tensor.AutoDeviceNote(s.Exp.Train.Device, s.Dev) }

// Upload makes Data the data of the settings d (the experiment's, or a
// run's: Run.Experiment(exp).Data, which differ when the runs sweep label
// noise): unless Data already holds them, it frees the data on the device,
// then loads d and copies it there. It reports whether it loaded.
func (s *Session) Upload(ctx context.Context, d experiment.Data) (loaded bool, err error) {
	if s.Data != nil && SameData(s.loaded, d) {
		return false, nil
	}
	old := s.Data
	s.Data = nil
	if old != nil && !sameTest(s.loaded, d) {
		old.Drop()
		old = nil
	}
	dd, err := devset.Load(ctx, s.W, s.Dev, d.Spec(), func(sp data.Split) error { return experiment.CheckSplit(s.Exp, sp) })
	if old != nil {
		// Only the label noise changed: the test set, and so its
		// corrupted copies, are the same.
		if err == nil {
			dd.TakeCorrupted(old)
		}
		old.Drop()
	}
	if err != nil {
		return false, fmt.Errorf("data: %w", err)
	}
	s.Data, s.loaded = dd, d
	return true, nil
}

// sameTest reports whether the data settings a and b differ at most in
// their label noise, which changes only the training labels.
func sameTest(a, b experiment.Data) bool {
	a.LabelNoise, b.LabelNoise = experiment.LabelNoise{}, experiment.LabelNoise{}
	return reflect.DeepEqual(a, b)
}

// SameData reports whether the data settings a and b give the same data:
// they are equal, label noise that is not Active counting as none (rate 0
// is no noise, whatever its kind and seed).
func SameData(a, b experiment.Data) bool {
	clean := func(d experiment.Data) experiment.Data {
		if !d.LabelNoise.Active() {
			d.LabelNoise = experiment.LabelNoise{}
		}
		return d
	}
	return reflect.DeepEqual(clean(a), clean(b))
}

// DataSettings returns the distinct data settings (SameData) of the runs
// of exp, in grid order: one unless the runs sweep label noise; exp's own
// when there are no runs.
func DataSettings(exp *experiment.Experiment, runs []experiment.Run) []experiment.Data {
	var out []experiment.Data
	for _, r := range runs {
		d := r.Experiment(exp).Data
		if !slices.ContainsFunc(out, func(o experiment.Data) bool { return SameData(o, d) }) {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		out = append(out, exp.Data)
	}
	return out
}

// Close frees the data and stops the worker.
func (s *Session) Close() {
	if s.Data != nil {
		s.Data.Drop()
		s.Data = nil
	}
	s.W.Close()
}

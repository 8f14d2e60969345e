package grid

import (
	"context"
	"fmt"

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
}

// Open starts a session for exp on its train.device.
func Open(ctx context.Context, exp *experiment.Experiment) (*Session, error) {
	s := &Session{Exp: exp, W: tensor.NewWorker(exp.Train.Threads)}
	if err := s.W.Do(ctx, func() (err error) { s.Dev, err = tensor.ParseDevice(exp.Train.Device); return err }); err != nil {
		s.W.Close()
		return nil, err
	}
	return s, nil
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

// Upload loads the experiment's data and copies it to the device.
func (s *Session) Upload(ctx context.Context) error {
	d, err := devset.Load(ctx, s.W, s.Dev, s.Exp.Data)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	s.Data = d
	return nil
}

// Close frees the data and stops the worker.
func (s *Session) Close() {
	if s.Data != nil {
		s.Data.Drop()
		s.Data = nil
	}
	s.W.Close()
}

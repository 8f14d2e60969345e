package train

import (
	"testing"

	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/experiment"
)

// A smoke run keeps the epoch structure of the run it stands for: at most
// Smoke.Epochs epochs of at most Smoke.StepsPerEpoch steps, max_steps
// still capping the total.
func TestSmokeSteps(t *testing.T) {
	for _, c := range []struct {
		name                      string
		train, batch, epochs, max int
		smoke                     *Smoke
		perEpoch, total           int64
	}{
		{"no smoke", 80, 8, 5, 0, nil, 10, 50},
		{"two of two", 80, 8, 5, 0, &Smoke{Epochs: 2, StepsPerEpoch: 2}, 2, 4},
		{"one-epoch run", 80, 8, 1, 0, &Smoke{Epochs: 2, StepsPerEpoch: 2}, 2, 2},
		{"short epochs", 8, 8, 5, 0, &Smoke{Epochs: 2, StepsPerEpoch: 2}, 1, 2},
		{"max_steps", 80, 8, 5, 3, &Smoke{Epochs: 2, StepsPerEpoch: 2}, 2, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			exp := experiment.Default()
			exp.Train.BatchSize, exp.Train.Epochs, exp.Train.MaxSteps = c.batch, c.epochs, c.max
			r := &Runner{Exp: exp, Data: &devset.Data{TrainSize: c.train}, Smoke: c.smoke}
			if pe, tot := r.Steps(); pe != c.perEpoch || tot != c.total {
				t.Errorf("Steps() = %d per epoch, %d in all; want %d, %d", pe, tot, c.perEpoch, c.total)
			}
		})
	}
}

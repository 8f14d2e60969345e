package devset

import (
	"context"
	"fmt"
	"slices"

	"github.com/optlab/optlab/host/corrupt"
	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/tensor"
)

// Data is an experiment's data on the device, shared by its runs.
type Data struct {
	Name                string
	Train, Test, Val    *Set
	OOD                 *Set
	Classes             int
	Shape               []int64
	Augment             Augment
	TrainSize, TestSize int
	// LabelNoise is what the label noise of [data.label_noise] did to the
	// training labels (data.Split.Noise); nil without label noise.
	LabelNoise *data.NoiseStats
	// Content identifies the files the data was read from, as they were
	// read (data.Split.Content); "" for data not read from data.path.
	Content string
	// corrupted caches Corrupted's sets.
	corrupted map[corruptedKey]*Set
}

type corruptedKey struct {
	family   string
	severity int
	seed     int64
}

// Load loads the data d names (data.Load, data.LoadOOD) and copies it to
// the device. The checks, if any, see the loaded split first (the host
// passes experiment.CheckSplit, which only the data can answer for npz
// files); the first error stops the load.
func Load(ctx context.Context, w *tensor.Worker, dev tensor.Device, d data.Spec, checks ...func(data.Split) error) (*Data, error) {
	sp, err := data.Load(d)
	if err != nil {
		return nil, err
	}
	for _, check := range checks {
		if err := check(sp); err != nil {
			return nil, err
		}
	}
	out := &Data{Name: d.Dataset, Classes: sp.Train.Classes, TrainSize: sp.Train.Len(), TestSize: sp.Test.Len(), LabelNoise: sp.Noise, Content: sp.Content}
	for _, v := range sp.Train.Shape {
		out.Shape = append(out.Shape, int64(v))
	}
	for _, a := range d.Augment {
		switch a {
		case "crop":
			out.Augment.Crop = 4
		case "flip":
			out.Augment.Flip = true
		}
	}
	up := func(s *data.Set) (*Set, error) {
		if s == nil {
			return nil, nil
		}
		return Upload(ctx, w, dev, s, d.Normalize)
	}
	if out.Train, err = up(sp.Train); err != nil {
		return nil, err
	}
	if out.Test, err = up(sp.Test); err != nil {
		out.Drop()
		return nil, err
	}
	if out.Val, err = up(sp.Val); err != nil {
		out.Drop()
		return nil, err
	}
	ood, err := data.LoadOOD(d)
	if err == nil {
		out.OOD, err = up(ood)
	}
	if err != nil {
		out.Drop()
		return nil, err
	}
	return out, nil
}

// Corrupted returns the test set corrupted by f at severity sev with the
// given seed (render.Apply), computed on the device the first time it is
// asked for and kept until Drop: the corrupted images do not depend on the
// model, so every run of a session scores on the same ones.
func (d *Data) Corrupted(ctx context.Context, w *tensor.Worker, f corrupt.Family, sev int, seed int64) (*Set, error) {
	k := corruptedKey{f.Name, sev, seed}
	if s, ok := d.corrupted[k]; ok {
		return s, nil
	}
	s, err := d.Test.Corrupt(ctx, w, f, sev, seed)
	if err != nil {
		return nil, err
	}
	if d.corrupted == nil {
		d.corrupted = map[corruptedKey]*Set{}
	}
	d.corrupted[k] = s
	return s, nil
}

// TakeCorrupted moves the corrupted test sets of old, whose test set is
// d's, to d.
func (d *Data) TakeCorrupted(old *Data) {
	if len(old.corrupted) == 0 {
		return
	}
	if d.corrupted == nil {
		d.corrupted = map[corruptedKey]*Set{}
	}
	for k, s := range old.corrupted {
		if prev, ok := d.corrupted[k]; ok {
			prev.Drop()
		}
		d.corrupted[k] = s
	}
	old.corrupted = nil
}

// CorruptedKeys lists the corrupted sets made so far, as
// "family/severity/seed".
func (d *Data) CorruptedKeys() []string {
	var out []string
	for k := range d.corrupted {
		out = append(out, fmt.Sprintf("%s/%d/%d", k.family, k.severity, k.seed))
	}
	slices.Sort(out)
	return out
}

// Drop frees the device copies.
func (d *Data) Drop() {
	for _, s := range d.corrupted {
		s.Drop()
	}
	d.corrupted = nil
	for _, s := range []*Set{d.Train, d.Test, d.Val, d.OOD} {
		if s != nil {
			s.Drop()
		}
	}
}

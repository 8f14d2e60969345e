package statedict

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// Prefixes of the tensors a Gaussian predictive adds beside its mean: the
// elementwise standard deviation of a Samples predictive over plugin
// vectors, and ρ (σ = softplus(ρ)) of a variational member. Load skips
// them, so such a file initializes a run at the mean.
const (
	PosteriorStd = "posterior_std."
	PosteriorRho = "posterior_rho."
)

// MaskPrefix starts the names of the 0/1 masks a members predictive saves
// beside its vectors (optim.Predictive.Masks: a sparse member's active
// weights), "mask.<name>" for each parameter's name. Load skips them.
const MaskPrefix = "mask."

// Metadata keys of a saved predictive.
const (
	// MetaPredictive is "point", "members" or "samples".
	MetaPredictive = "optlab.predictive"
	// MetaWeights lists a members predictive's weights (absent: uniform).
	MetaWeights = "optlab.weights"
	// MetaSamples is a samples predictive's number of MC samples.
	MetaSamples = "optlab.samples"
)

// SavePredictive writes the model that pred evaluates, so that what is
// saved is what was evaluated: a PyTorch state dict (safetensors, at path,
// atomically) under the models' PyTorch names.
//
//   - Point: member 0's live parameters and BatchNorm statistics, or every
//     member's for a run of several (Save).
//   - Members: each vector of the average with the statistics it is
//     evaluated with (its own, after a Copy with BN or UpdateBN, else its
//     member's live ones): bare names for one vector (an averaged model,
//     SWA's), "members.<i>." for several; the weights in the metadata;
//     each vector's mask, when the predictive has masks, under "mask."
//     and the vector's names.
//   - Samples of a Gaussian over plugin vectors: the mean with its
//     statistics under bare names, the standard deviation under
//     "posterior_std."; of a variational member: its means μ (Save) and ρ
//     under "posterior_rho.".
//
// The metadata records the predictive kind beside Save's.
func SavePredictive(ctx context.Context, eng *engine.Engine, pred optim.Predictive, path string, extra map[string]string) error {
	meta := map[string]string{}
	for k, v := range extra {
		meta[k] = v
	}
	switch pred.Kind {
	case optim.Point:
		meta[MetaPredictive] = "point"
		return Save(ctx, eng, path, meta)
	case optim.Members:
		meta[MetaPredictive] = "members"
		if len(pred.Weights) > 0 {
			ws := make([]string, len(pred.Weights))
			for i, w := range pred.Weights {
				ws[i] = strconv.FormatFloat(w, 'g', -1, 64)
			}
			meta[MetaWeights] = strings.Join(ws, ",")
		}
		if len(pred.Masks) != 0 && len(pred.Masks) != len(pred.Vecs) {
			return fmt.Errorf("checkpoint %s: %d masks for %d vectors", path, len(pred.Masks), len(pred.Vecs))
		}
		return saveVectors(ctx, eng, pred.Vecs, pred.Masks, path, meta)
	case optim.Samples:
		meta[MetaPredictive] = "samples"
		meta[MetaSamples] = strconv.Itoa(pred.N)
		if pred.Std == 0 {
			return saveVariational(ctx, eng, path, meta)
		}
		return saveGaussian(ctx, eng, pred.Mean, pred.Std, path, meta)
	}
	return fmt.Errorf("checkpoint %s: unknown predictive kind %d", path, pred.Kind)
}

// vecState returns a host copy of handle h's parameters, the member whose
// layout it has, and the BatchNorm statistics it is evaluated with (nil
// for a model without). Call on the worker.
func vecState(eng *engine.Engine, h optim.Vec) (params, buf []float32, m int, err error) {
	t, m, err := eng.Vec(h)
	if err != nil {
		return nil, nil, 0, err
	}
	mem := eng.Members()[m]
	stats := mem.Buf
	if st, ok := eng.VecStats(h); ok && st.Valid() {
		stats = *st
	}
	s := tensor.NewScope()
	defer s.Close()
	params = s.Float32s(t)
	if mem.Model.BufNumel > 0 {
		buf = s.Float32s(stats)
	}
	if err := s.Err(); err != nil {
		return nil, nil, 0, err
	}
	return params, buf, m, nil
}

// statsBatches is the counter (engine.BNBatches) of the BatchNorm
// statistics that handle h of member m is evaluated with, those vecState
// returns: its own, else its member's live ones. Call on the worker.
func statsBatches(eng *engine.Engine, h optim.Vec, m int) int64 {
	if st, ok := eng.VecStats(h); ok && st.Valid() {
		return eng.BNBatches(h)
	}
	return eng.BNBatches(optim.ParamsOf(m))
}

// saveVectors writes vectors vs, each as a whole model, and their masks
// when given (see SavePredictive).
func saveVectors(ctx context.Context, eng *engine.Engine, vs, masks []optim.Vec, path string, meta map[string]string) error {
	if len(vs) == 0 {
		return fmt.Errorf("checkpoint %s: a members predictive with no vectors", path)
	}
	var all []checkpoint.Tensor
	archs := make([]string, len(vs))
	err := eng.Worker().Do(ctx, func() error {
		for i, h := range vs {
			params, buf, m, err := vecState(eng, h)
			if err != nil {
				return fmt.Errorf("vector %d of the predictive: %w", i, err)
			}
			mod := eng.Members()[m].Model
			all = append(all, stateDict(mod, params, buf, statsBatches(eng, h, m), MemberPrefix(i, len(vs)))...)
			archs[i] = mod.Arch
			if len(masks) > 0 {
				mask, _, _, err := vecState(eng, masks[i])
				if err != nil {
					return fmt.Errorf("mask %d of the predictive: %w", i, err)
				}
				if len(mask) != len(params) {
					return fmt.Errorf("mask %d of the predictive has %d values, its vector %d", i, len(mask), len(params))
				}
				all = append(all, splitVector(mod, mask, MaskPrefix+MemberPrefix(i, len(vs)))...)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return write(eng, path, all, archs, meta)
}

// saveGaussian writes a Gaussian's mean as the model and its standard
// deviation under PosteriorStd.
func saveGaussian(ctx context.Context, eng *engine.Engine, mean, std optim.Vec, path string, meta map[string]string) error {
	var all []checkpoint.Tensor
	var arch string
	err := eng.Worker().Do(ctx, func() error {
		params, buf, m, err := vecState(eng, mean)
		if err != nil {
			return fmt.Errorf("the predictive's mean: %w", err)
		}
		sd, _, _, err := vecState(eng, std)
		if err != nil {
			return fmt.Errorf("the predictive's std: %w", err)
		}
		mod := eng.Members()[m].Model
		all = append(stateDict(mod, params, buf, statsBatches(eng, mean, m), ""), splitVector(mod, sd, PosteriorStd)...)
		arch = mod.Arch
		return nil
	})
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return write(eng, path, all, []string{arch}, meta)
}

// saveVariational writes member 0's means and BatchNorm statistics as the
// model and its ρ under PosteriorRho.
func saveVariational(ctx context.Context, eng *engine.Engine, path string, meta map[string]string) error {
	var all []checkpoint.Tensor
	var arch string
	err := eng.Worker().Do(ctx, func() error {
		params, buf, m, err := vecState(eng, optim.Params)
		if err != nil {
			return err
		}
		mod := eng.Members()[m].Model
		all = stateDict(mod, params, buf, statsBatches(eng, optim.Params, m), "")
		arch = mod.Arch
		rho, _, _, err := vecState(eng, optim.RhoOf(0))
		if err != nil {
			return fmt.Errorf("ρ: %w", err)
		}
		all = append(all, splitVector(mod, rho, PosteriorRho)...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return write(eng, path, all, []string{arch}, meta)
}

// write writes tensors with Save's metadata for models archs, plus meta.
func write(eng *engine.Engine, path string, all []checkpoint.Tensor, archs []string, meta map[string]string) error {
	m := map[string]string{
		"format":         "pt",
		"optlab.archs":   strings.Join(archs, ","),
		"optlab.members": strconv.Itoa(len(archs)),
		"optlab.step":    strconv.FormatInt(eng.Step(), 10),
	}
	for k, v := range meta {
		m[k] = v
	}
	return checkpoint.Write(path, all, m)
}

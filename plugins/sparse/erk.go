package sparse

import (
	"fmt"
	"math"

	"github.com/optlab/optlab/sdk/optim"
)

// ERK returns the density of each layer of the given shapes under the
// Erdős–Rényi-Kernel rule at overall density d, as FreeTickets'
// Masking.init(mode="ERK") computes it (sparselearning/core.py, after
// RigL): layer l's density is ε·r_l with r_l = (Σ shape_l / Π shape_l)^power,
// ε chosen so that the layers hold d of all their weights; while ε·max r_l
// exceeds 1, the layers whose r_l is that maximum become dense (density 1),
// are counted with all their weights, and ε is solved again over the
// others. With power 0 every sparse layer gets the same density. If every
// layer ends dense (d close to 1) all densities are 1. A density may come
// out below 0 when the dense layers alone exceed the budget (a tiny d);
// layerPlan clamps the counts.
func ERK(shapes [][]int64, d, power float64) []float64 {
	n := len(shapes)
	dense := make([]bool, n)
	raw := make([]float64, n)
	var eps float64
	for {
		var rhs, divisor, maxRaw float64
		sparse := 0
		for i, s := range shapes {
			size := float64(numel(s))
			if dense[i] {
				rhs -= size * (1 - d)
				continue
			}
			sparse++
			rhs += size * d
			raw[i] = math.Pow(float64(sum(s))/size, power)
			divisor += raw[i] * size
			maxRaw = math.Max(maxRaw, raw[i])
		}
		if sparse == 0 {
			break
		}
		eps = rhs / divisor
		if maxRaw*eps <= 1 {
			break
		}
		for i := range shapes {
			if !dense[i] && raw[i] == maxRaw {
				dense[i] = true
			}
		}
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = 1
		if !dense[i] {
			out[i] = eps * raw[i]
		}
	}
	return out
}

func numel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

func sum(shape []int64) int64 {
	var s int64
	for _, d := range shape {
		s += d
	}
	return s
}

// maxLayer is the largest number of elements a sparse layer may have: the
// per-layer counts travel to the device as float32 values that a SegReduce
// reads back exactly, which holds for integers up to 2²⁴.
const maxLayer = 1 << 24

// Layer is one sparse layer (weight tensor) of a member.
type Layer struct {
	// Name is the tensor's name in the layout.
	Name string
	// Offset and Size place it in the member's flat parameter vector.
	Offset, Size int64
	// Density is its ERK density and Active the number of its active
	// weights, ⌊Density·Size + ½⌋: the same after every topology update,
	// which regrows as many weights as it prunes.
	Density float64
	Active  int64
}

// layerPlan returns the sparse layers of a member with layout ml at
// overall density d: the tensors of Kind "weight" (FreeTickets masks every
// parameter but biases and BatchNorm's), with ERK densities over them and
// Active = ⌊density·size + ½⌋ weights each, clamped to [0, size]. A weight
// tensor whose count comes out at its size (ERK's dense layers) is not
// listed: it stays dense, its mask all ones. The tensors must tile the
// vector in order, as the segment ops assume.
func layerPlan(ml optim.MemberLayout, d, power float64) ([]Layer, error) {
	if len(ml.Tensors) == 0 {
		return nil, fmt.Errorf("the layout lists no tensors, so no weight layers to sparsify (%d parameters)", ml.Numel)
	}
	var (
		at     int64
		shapes [][]int64
		idx    []int
	)
	for i, t := range ml.Tensors {
		if t.Offset != at {
			return nil, fmt.Errorf("tensor %s starts at %d, not at %d: the tensors do not tile the vector in order", t.Name, t.Offset, at)
		}
		at += t.Numel()
		if t.Kind == "weight" {
			shapes = append(shapes, t.Shape)
			idx = append(idx, i)
		}
	}
	if at != ml.Numel {
		return nil, fmt.Errorf("the tensors hold %d of the %d parameters", at, ml.Numel)
	}
	var out []Layer
	for j, dl := range ERK(shapes, d, power) {
		t := ml.Tensors[idx[j]]
		size := t.Numel()
		active := min(max(int64(math.Floor(dl*float64(size)+0.5)), 0), size)
		if active == size {
			continue
		}
		if size > maxLayer {
			return nil, fmt.Errorf("weight tensor %s has %d elements; sparse layers may have at most 2²⁴ = %d (exact per-layer counts on the device)", t.Name, size, maxLayer)
		}
		out = append(out, Layer{Name: t.Name, Offset: t.Offset, Size: size, Density: dl, Active: active})
	}
	return out, nil
}

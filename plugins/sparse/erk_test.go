package sparse

import (
	"math"
	"strings"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
)

// lenet5 is the weight shapes of the host's lenet5 on 1×28×28 inputs.
var lenet5 = [][]int64{{6, 1, 5, 5}, {16, 6, 5, 5}, {120, 400}, {84, 120}, {10, 84}}

// ERK's densities are ε·(Σ shape/Π shape)^power, with the layers whose
// ε·ratio exceeds 1 made dense one maximum at a time and ε solved over the
// rest so that the layers hold d of their weights, as FreeTickets' ERK
// loop; the expected values are the loop worked by hand.
func TestERK(t *testing.T) {
	ratio := func(s []int64) float64 { return float64(sum(s)) / float64(numel(s)) }
	// LeNet-5 at d = 0.2: conv1 (ratio 17/150) goes dense first, then fc3
	// (94/840); ε = (0.2·60480 − 0.8·990)/(32 + 520 + 204) over the rest.
	eps := (0.2*60480 - 0.8*990) / (32 + 520 + 204.0)
	tests := []struct {
		name   string
		shapes [][]int64
		d, pow float64
		want   []float64
	}{
		{"lenet5 d=0.2", lenet5, 0.2, 1,
			[]float64{1, eps * ratio(lenet5[1]), eps * ratio(lenet5[2]), eps * ratio(lenet5[3]), 1}},
		{"power 0 is uniform", [][]int64{{8, 4}, {4, 8, 3, 3}}, 0.3, 0, []float64{0.3, 0.3}},
		{"one layer", [][]int64{{100}}, 0.25, 1, []float64{0.25}},
		{"dense", lenet5, 1, 1, []float64{1, 1, 1, 1, 1}},
		{"mlp", [][]int64{{4, 4}, {3, 4}}, 0.5, 1, []float64{14.0 / 15 * 8 / 16, 14.0 / 15 * 7 / 12}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ERK(tt.shapes, tt.d, tt.pow)
			for i := range got {
				if math.Abs(got[i]-tt.want[i]) > 1e-12 {
					t.Errorf("density %d = %v, want %v (all %v)", i, got[i], tt.want[i], got)
				}
			}
			// The budget holds: Σ d_l·n_l = d·Σ n_l.
			var kept, total float64
			for i, s := range tt.shapes {
				kept += got[i] * float64(numel(s))
				total += float64(numel(s))
			}
			if math.Abs(kept-tt.d*total) > 1e-9*total {
				t.Errorf("the layers hold %v weights, want %v", kept, tt.d*total)
			}
		})
	}
}

// The plan lists the weight tensors that stay sparse, with their ERK
// counts; biases and ERK's dense layers keep masks of ones.
func TestLayerPlan(t *testing.T) {
	tensors := func(shapes ...[]int64) []optim.Tensor {
		var out []optim.Tensor
		var at int64
		for i, s := range shapes {
			out = append(out, optim.Tensor{Name: "w" + string(rune('0'+i)), Shape: s, Offset: at, Kind: "weight"})
			at += numel(s)
			out = append(out, optim.Tensor{Name: "b" + string(rune('0'+i)), Shape: s[:1], Offset: at, Kind: "bias"})
			at += s[0]
		}
		return out
	}
	layout := func(ts []optim.Tensor) optim.MemberLayout {
		last := ts[len(ts)-1]
		return optim.MemberLayout{Numel: last.Offset + last.Numel(), Tensors: ts}
	}
	ts := tensors(lenet5...)
	got, err := layerPlan(layout(ts), 0.2, 1)
	if err != nil {
		t.Fatal(err)
	}
	d := ERK(lenet5, 0.2, 1)
	var want []Layer
	for i := 1; i <= 3; i++ {
		w := ts[2*i]
		want = append(want, Layer{Name: w.Name, Offset: w.Offset, Size: w.Numel(), Density: d[i],
			Active: int64(math.Floor(d[i]*float64(w.Numel()) + 0.5))})
	}
	if len(got) != len(want) {
		t.Fatalf("plan %+v, want %+v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("layer %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if got[0].Active != 478 || got[1].Active != 7775 || got[2].Active != 3050 {
		t.Errorf("active counts %d %d %d, want 478 7775 3050", got[0].Active, got[1].Active, got[2].Active)
	}

	gap := tensors([]int64{4, 4})
	gap[1].Offset++
	huge := tensors([]int64{1 << 13, 1 << 12}, []int64{2, 2})
	for _, tt := range []struct {
		name string
		l    optim.MemberLayout
		want string
	}{
		{"no tensors", optim.MemberLayout{Numel: 10}, "lists no tensors"},
		{"gap", optim.MemberLayout{Numel: 21, Tensors: gap}, "do not tile"},
		{"short", optim.MemberLayout{Numel: 30, Tensors: tensors([]int64{4, 4})}, "hold 20 of the 30"},
		{"huge layer", layout(huge), "at most 2²⁴"},
	} {
		if _, err := layerPlan(tt.l, 0.2, 1); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

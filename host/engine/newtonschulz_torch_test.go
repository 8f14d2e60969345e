package engine

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/internal/torchtwin"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

// TestNewtonSchulzMatchesPyTorch: the NewtonSchulz op of the exact host
// (optimtest.NewtonSchulzRef, gonum, float64) and of the engine (libtorch,
// float32) against Keller Jordan's zeropower_via_newtonschulz5 run by
// PyTorch in float64 (testdata/newtonschulz.py), on random tensors of a
// tall, a wide and a square matrix, a conv filter [8, 3, 3, 3] (8×27), a
// tall 1×1 conv [16, 2, 1, 1] and a bias (and a second wide and tall
// matrix, which the engine stacks with the first), with Keller Jordan's
// coefficients and with others: per tensor, ‖got − torch‖_F ≤ 1e-12·‖torch‖_F
// for the exact host and 1e-4 for the engine; the bias is copied.
func TestNewtonSchulzMatchesPyTorch(t *testing.T) {
	torchtwin.Script(t) // skips without Debian's python3-torch
	shapes := map[string][]int64{
		"tall": {9, 4}, "wide": {3, 7}, "square": {5, 5}, "conv": {8, 3, 3, 3}, "conv1x1": {16, 2, 1, 1}, "bias": {9},
		"wide2": {3, 7}, "tall2": {9, 4},
	}
	b := model.NewBuilder()
	for _, name := range []string{"tall", "wide", "bias", "square", "conv", "wide2", "conv1x1", "tall2"} {
		b.Param(name, shapes[name], "weight", model.Init{Kind: model.Normal, Std: 1})
	}
	m, err := b.Build("nsshapes", 2, []int64{1}, semWideNet{})
	if err != nil {
		t.Fatal(err)
	}
	e := semEngine(t, Config{Seed: 1}, m)
	l, _ := e.Layout(context.Background())
	ml := l.Members[0]

	r := rand.New(rand.NewPCG(7, 8))
	x := make([]float64, ml.Numel)
	for i := range x {
		x[i] = float64(float32(r.NormFloat64())) // what the engine holds, exactly
	}
	hs := optim.NewHandles()
	src, dst := hs.New("src"), hs.New("dst")
	if _, err := e.Exec(context.Background(), hs.Prog().Alloc(src, 0).Alloc(dst, 0)); err != nil {
		t.Fatal(err)
	}
	semWrite(t, e, src, x)

	for _, o := range []optim.NewtonSchulz{
		{Steps: optim.NS5Steps, A: optim.NS5A, B: optim.NS5B, C: optim.NS5C, Eps: optim.NS5Eps},
		{Steps: 2, A: 2, B: -1.5, C: 0.5, Eps: 0.01},
	} {
		o.Dst, o.Src = dst, src
		want := torchNS(t, ml, x, o)
		exact := optimtest.NewtonSchulzRef(ml, x, o)
		if _, err := e.Exec(context.Background(), hs.Prog().NewtonSchulzOp(o)); err != nil {
			t.Fatal(err)
		}
		got := semRead(t, e, dst)
		for _, ts := range ml.Tensors {
			n := ts.Numel()
			w := want[ts.Offset : ts.Offset+n]
			for _, c := range []struct {
				host string
				v    []float64
				tol  float64
			}{{"exact host", exact, 1e-12}, {"engine", got, 1e-4}} {
				rel := relErr(c.v[ts.Offset:ts.Offset+n], w)
				t.Logf("steps=%d a=%g: %-7s %v: %s relative error %.2g", o.Steps, o.A, ts.Name, ts.Shape, c.host, rel)
				if !(rel <= c.tol) {
					t.Errorf("steps=%d a=%g: %s %v: %s differs from PyTorch by %.3g relative (> %g)", o.Steps, o.A, ts.Name, ts.Shape, c.host, rel, c.tol)
				}
				if len(ts.Shape) < 2 && rel != 0 {
					t.Errorf("%s: %s changed a tensor of %d dim(s)", ts.Name, c.host, len(ts.Shape))
				}
			}
		}
	}
}

// torchNS runs testdata/newtonschulz.py on x's tensors and returns its
// result as one vector.
func torchNS(t *testing.T, ml optim.MemberLayout, x []float64, o optim.NewtonSchulz) []float64 {
	t.Helper()
	type tensorJSON struct {
		Shape []int64   `json:"shape"`
		Data  []float64 `json:"data"`
	}
	req := struct {
		Steps   int32        `json:"steps"`
		A       float64      `json:"a"`
		B       float64      `json:"b"`
		C       float64      `json:"c"`
		Eps     float64      `json:"eps"`
		Tensors []tensorJSON `json:"tensors"`
	}{Steps: o.Steps, A: o.A, B: o.B, C: o.C, Eps: o.Eps}
	for _, ts := range ml.Tensors {
		req.Tensors = append(req.Tensors, tensorJSON{ts.Shape, x[ts.Offset : ts.Offset+ts.Numel()]})
	}
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(torchtwin.Python, filepath.Join("testdata", "newtonschulz.py"))
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("newtonschulz.py: %v", err)
	}
	var res struct {
		Torch   string      `json:"torch"`
		Results [][]float64 `json:"results"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("newtonschulz.py: %v\n%s", err, out)
	}
	t.Logf("PyTorch %s", res.Torch)
	var flat []float64
	for _, v := range res.Results {
		flat = append(flat, v...)
	}
	if len(flat) != len(x) {
		t.Fatalf("newtonschulz.py gave %d values for %d", len(flat), len(x))
	}
	return flat
}

// relErr returns ‖got − want‖₂/‖want‖₂ (‖got‖₂ when want is 0).
func relErr(got, want []float64) float64 {
	var d, w float64
	for i := range want {
		d += (got[i] - want[i]) * (got[i] - want[i])
		w += want[i] * want[i]
	}
	if w == 0 {
		return math.Sqrt(d)
	}
	return math.Sqrt(d / w)
}

package engine

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/sdk/optim"
)

// TestReadSegments checks what the Read op's documentation says of
// segment registers (issue 39): Read (and Report) refuse one, with the
// message the documentation quotes, and its recipe reads every segment's
// value in one Exec: Fill a vector with the segment register, then for
// each segment Dot it with a vector that is 1 at the segment's first
// element and 0 elsewhere (FillRange). Each value comes back as the
// float32 Fill stored, bitwise.
func TestReadSegments(t *testing.T) {
	mlp, err := model.NewMLP(10, []int64{1, 8, 8})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*model.Model{mlp, regCNN(t)} {
		e := semEngine(t, Config{Seed: 2}, m)
		l, err := e.Layout(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n := int(m.Numel)
		semExec(t, e, optim.Prog().Alloc(1, 0).Alloc(2, 0).Alloc(3, 0))
		regRand(t, e, 1, n, 5)
		for _, by := range []optim.Segmentation{optim.PerTensor, optim.PerRow} {
			for _, op := range []struct {
				name string
				use  func(p *optim.Program, r optim.Reg)
			}{
				{"Read", func(p *optim.Program, r optim.Reg) { p.Read(r) }},
				{"Report", func(p *optim.Program, r optim.Reg) { p.Report("norms", r) }},
			} {
				p := optim.Prog()
				op.use(p, p.SegNorm(by, 1))
				_, err := e.Exec(context.Background(), p)
				if err == nil || !strings.Contains(err.Error(), "holds one value per segment; this op takes a scalar") {
					t.Errorf("%s %v: %s of a segment register: error %v, want the documented refusal", m.Arch, by, op.name, err)
				}
			}

			// The recipe.
			sizes := l.Members[0].Segments(by)
			p := optim.Prog()
			p.Fill(2, p.SegNorm(by, 1))
			regs := make([]optim.Reg, len(sizes))
			var off int64
			for k, size := range sizes {
				p.Fill(3, optim.K(0)).FillRange(3, off, 1, 1)
				regs[k] = p.Dot(2, 3)
				off += size
			}
			p.Read(regs...)
			res, err := e.Exec(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			filled := semRead(t, e, 2)
			off = 0
			for k, size := range sizes {
				if got, want := res.Get(regs[k]), filled[off]; math.Float64bits(got) != math.Float64bits(want) {
					t.Errorf("%s %v: segment %d of %d read as %v, Fill stored %v", m.Arch, by, k, len(sizes), got, want)
				}
				off += size
			}
		}
	}
}

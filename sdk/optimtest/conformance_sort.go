package optimtest

import (
	"fmt"
	"slices"

	"github.com/optlab/optlab/sdk/optim"
)

// The cases of SortColumns (protocol minor 12): every factor matrix's
// columns reordered by the descending diagonal of a key, ties in their
// order, and a parameter vector's blocks permuted along; what it must give
// is SortColumnsRef's.

// sortKey returns key matrices with known diagonals: values with ties (so
// that a host must keep equal values in their order) in a scrambled order,
// off-diagonal entries random.
func sortKey(fl optim.MemberLayout, seed uint64) []float64 {
	return perFactor(fl, func(i, n int) []float64 {
		k := randomValues(int64(n*n), seed+uint64(i))
		m := max(n-1, 1)
		for j := range n {
			k[j*n+j] = float64((j*5+i)%m) - 1.5
		}
		return k
	})
}

func sortCases() []hostCase {
	var cs []hostCase
	for _, block := range []int64{0, factorBlock} {
		for _, s := range []optim.VecShape{optim.LeftFactor, optim.RightFactor} {
			cs = append(cs, hostCase{name: fmt.Sprintf("SortColumns/%s factors, block %d, with a carry", s, block), run: func(c *conf) {
				l, fl := c.factorLayout(s, block)
				q := perFactor(fl, func(i, n int) []float64 { return randomValues(int64(n*n), uint64(130+i)) })
				key := sortKey(fl, 150)
				x := randomValues(c.n(0), 170)
				qv, kv, xv := c.knownL(l, "Q", q), c.knownL(l, "K", key), c.known(0, "v", x)
				c.p().SortColumns(qv, kv, xv)
				wantQ, wantX := slices.Clone(q), slices.Clone(x)
				SortColumnsRef(wantQ, key, fl, s == optim.LeftFactor, wantX, c.l.TilesOf(optim.VecLayout{}, block))
				c.expectSame("Q's columns sorted", qv, c.knownL(l, "wantQ", wantQ))
				c.expectSame("the carry permuted along", xv, c.known(0, "wantX", wantX))
				c.expectSame("the key unchanged", kv, c.knownL(l, "key", key))
			}})
		}
	}
	cs = append(cs,
		hostCase{name: "SortColumns/no carry, and a matrix sorted by its own diagonal", run: func(c *conf) {
			l, fl := c.factorLayout(optim.RightFactor, factorBlock)
			q := perFactor(fl, func(i, n int) []float64 { return randomValues(int64(n*n), uint64(190+i)) })
			key := sortKey(fl, 210)
			qv, kv := c.knownL(l, "Q", q), c.knownL(l, "K", key)
			c.p().SortColumns(qv, kv, 0).SortColumns(kv, kv, 0)
			want := slices.Clone(q)
			SortColumnsRef(want, key, fl, false, nil, nil)
			c.expectSame("Q's columns sorted", qv, c.knownL(l, "want", want))
			self := slices.Clone(key)
			SortColumnsRef(self, key, fl, false, nil, nil)
			c.expectSame("the key's columns sorted by its own diagonal", kv, c.knownL(l, "self", self))
		}},
		hostCase{name: "SortColumns/of a parameter vector", run: func(c *conf) {
			l, _ := c.factorLayout(optim.LeftFactor, 0)
			k, x := c.allocL(l, "K"), c.alloc(0, "x")
			c.vecFails("holds parameters; sort_columns's dst is a factor vector", func(p *optim.Program) { p.SortColumns(x, k, 0) })
		}},
		hostCase{name: "SortColumns/a key of the other side", run: func(c *conf) {
			l, _ := c.factorLayout(optim.LeftFactor, 0)
			r, _ := c.factorLayout(optim.RightFactor, 0)
			q, k := c.allocL(l, "Q"), c.allocL(r, "K")
			if c.l.Of(l).Numel == c.l.Of(r).Numel {
				c.t.Skip("member 0's left and right factors have one size")
			}
			c.vecFails("", func(p *optim.Program) { p.SortColumns(q, k, 0) })
		}},
		hostCase{name: "SortColumns/a factor vector as the carry", run: func(c *conf) {
			l, _ := c.factorLayout(optim.LeftFactor, 0)
			q, k, w := c.allocL(l, "Q"), c.allocL(l, "K"), c.allocL(l, "W")
			c.vecFails("sort_columns's carry is a parameter vector of member 0", func(p *optim.Program) { p.SortColumns(q, k, w) })
		}},
	)
	return cs
}

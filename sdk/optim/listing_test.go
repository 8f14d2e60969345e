package optim

import (
	"strings"
	"testing"
)

// A gradient pass's unset targets and noise (handle 0, which is also
// params[0]) are listed as none.
func TestListingGradTargets(t *testing.T) {
	hs := NewHandles().Sub("m")
	g, rho, eps := hs.New("g"), hs.New("g_rho"), hs.New("kappa")
	tests := []struct {
		op   Op
		want string
	}{
		{Grad{Out: g, At: Params, BN: BNUpdate}, "m/g = ∇L(params[0]) batch=all bn=update  →"},
		{Grad{At: ParamsOf(1), OutRho: rho, Eps: eps, BN: BNFreeze}, "_ = ∇L(params[1]) batch=all bn=freeze eps=m/kappa rho-grad=m/g_rho"},
		{Grad{Out: g, At: Params, Eps: eps, BN: BNUpdate}, "m/g = ∇L(params[0]) batch=all bn=update eps=m/kappa"},
		{JointGrad{Outs: []Vec{g, 0}, Ats: []Vec{Params, ParamsOf(1)}, BN: BNUpdate}, "[m/g _] = ∇L([params[0] params[1]]) batch=all bn=update"},
	}
	for _, tt := range tests {
		p := hs.Prog()
		p.Ops = append(p.Ops, tt.op)
		if got := p.String(); !strings.Contains(got, tt.want) {
			t.Errorf("%#v listed as %q, want %q", tt.op, got, tt.want)
		}
	}
}

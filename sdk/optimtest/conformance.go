package optimtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
)

// HostTestOptions describes the host under TestHost: what the suite may
// expect of its numbers and of its base optimizer. Everything else (members,
// layouts, variational members, batch size) the suite reads from Layout.
type HostTestOptions struct {
	// Tol is the relative tolerance of the results the suite computes in
	// two ways or against float64 references (0: 1e-12, for an exact float64
	// host; a float32 device needs about 1e-5).
	Tol float64
	// BaseSGD says BaseStep is plain SGD (no momentum, no weight decay): the
	// suite then checks θ ← θ − lr·g exactly; otherwise only that a step
	// moves against the gradient and that SetLR takes effect.
	BaseSGD bool
	// BatchNorm says the members normalize with batch statistics, so the
	// loss of a batch is not the mean of the losses of its parts: the cases
	// that rely on that are skipped.
	BatchNorm bool
	// Momentum, when not 0, says BaseStep is SGD with this momentum and
	// no dampening, Nesterov or weight decay: the BaseState cases then
	// check the momentum buffer's values (protocol minor 10).
	Momentum float64
	// Only, when not empty, runs only the cases whose name starts with it
	// (a second host configuration for a few cases, e.g. "BaseState/").
	Only string
}

// TestHost is the conformance suite of optim.Host, in the spirit of
// testing/fstest.TestFS: it runs a table of programs against fresh hosts
// made by newHost and checks the values they read and the errors they
// fail with against the semantics documented in sdk/optim (ops.go,
// regs.go, check.go). Every case is a subtest (named "<Op>/<what>"), with
// a new host. The suite sees a host only through Layout and Exec: it
// reads registers with Read ops (which it appends to its programs) and
// observes a segment register by filling a vector with it. Report ops go
// to the host's own metrics, which the suite cannot see: it checks only
// that they are accepted without changing the Result and refused with
// bad arguments, so a host checks the values it receives in its own tests.
//
// newHost must return a host in the state a run starts in: no vector
// allocated, every member holding a current batch of Layout.BatchSize
// samples (the same batch for all members, as JointGrad needs). The
// results the suite expects do not depend on the members' initial
// parameters: it fills vectors with known values, or computes one thing in
// two ways on the host (a Grad at the live parameters and at a copy of
// them, halves of a batch against the whole, a gradient against finite
// differences of the loss, …). Failing programs must return an
// *optim.OpError (errors.As) with the index and kind (optim.OpName) of the
// failing op, and a message that names the offending value where the case
// knows it (an unknown handle, a missing member, a vector's length), and
// a handle that names no vector must fail with an *optim.VecError (the
// message of opset.Checker); an op kind, unary, binary, arith or segment
// kind, segmentation or BatchNorm mode the host does not know must wrap
// errors.ErrUnsupported. A program whose builder recorded a misuse
// (Program.Err: a register of another program) must fail before any of
// its ops runs. The segment cases cut vectors by Layout's Tensors (a
// member without tensors is one tensor of shape [Numel]). Cases that need
// two members, members of different layouts, a variational member or a
// deterministic one are skipped when the layout has none.
func TestHost(t *testing.T, newHost func(t *testing.T) optim.Host, opts HostTestOptions) {
	if opts.Tol == 0 {
		opts.Tol = 1e-12
	}
	for _, hc := range hostCases() {
		if !strings.HasPrefix(hc.name, opts.Only) {
			continue
		}
		t.Run(hc.name, func(t *testing.T) {
			h := newHost(t)
			if hc.direct != nil {
				hc.direct(t, h)
				return
			}
			l, err := h.Layout(context.Background())
			if err != nil {
				t.Fatalf("Layout: %v", err)
			}
			c := newConf(t, h, l, opts)
			if why := c.unmet(hc.needs); why != "" {
				t.Skip(why)
			}
			hc.run(c)
			c.exec()
		})
	}
}

// needs are what a case requires of the host.
type needs uint

const (
	// needMembers: at least two members.
	needMembers needs = 1 << iota
	// needLayouts: two members whose vectors have different lengths.
	needLayouts
	// needVariational: a variational member (c.vm).
	needVariational
	// needDeterministic: a deterministic member (c.dm).
	needDeterministic
	// needJoint: two deterministic members (c.jm), for JointGrad.
	needJoint
	// needBaseSGD: HostTestOptions.BaseSGD.
	needBaseSGD
	// needBatchMeans: the loss of an even batch is the mean of its halves'.
	needBatchMeans
	// needMomentum: HostTestOptions.Momentum ≠ 0.
	needMomentum
	// needSamples: a batch size of at least 2 (sample vectors).
	needSamples
)

// hostCase is one row of the suite: run builds the programs and what they
// must give (direct, instead, checks the host itself).
type hostCase struct {
	name   string
	needs  needs
	run    func(c *conf)
	direct func(t *testing.T, h optim.Host)
}

// stray is a handle no case allocates.
const stray optim.Vec = 4242

// noMember is a member index no host under test has.
const noMember = 17

// conf builds the programs of one case and checks their results.
type conf struct {
	t    *testing.T
	h    optim.Host
	l    optim.Layout
	opts HostTestOptions
	hs   *optim.Handles

	progs  []*program
	checks []check
	owner  map[optim.Vec]optim.VecLayout
	ones   map[optim.VecLayout]optim.Vec
	units  map[int]optim.Vec
	noise  map[int]optim.Vec

	// vm, dm: a variational and a deterministic member; jm: two
	// deterministic members; lm: two members of different layouts (-1:
	// none).
	vm, dm int
	jm, lm [2]int
}

// program is one Exec of a case.
type program struct {
	p *optim.Program
	// fail is the op expected to fail (nil: the program must succeed).
	fail *failure
	// reads are the registers the checks read: exec appends their Read
	// ops to the program.
	reads []optim.Reg
	res   optim.Result
	ok    bool
}

type failure struct {
	// index is the op expected to fail; whole (index −1) expects the
	// program to fail before any op runs, with any error.
	index       int
	mention     string // the error message must contain it ("": any)
	unsupported bool   // the error must wrap errors.ErrUnsupported
	vec         bool   // the error must wrap an *optim.VecError
}

type check struct {
	what string
	fn   func(get func(ref) float64) error
}

// ref is a scalar register of one of a case's programs that the checks
// read.
type ref struct {
	prog int
	r    optim.Reg
}

// evalRef is the loss and accuracy registers of a gradient pass.
type evalRef struct{ loss, acc ref }

func newConf(t *testing.T, h optim.Host, l optim.Layout, opts HostTestOptions) *conf {
	c := &conf{t: t, h: h, l: l, opts: opts, hs: optim.NewHandles(),
		owner: map[optim.Vec]optim.VecLayout{}, ones: map[optim.VecLayout]optim.Vec{}, units: map[int]optim.Vec{}, noise: map[int]optim.Vec{},
		vm: -1, dm: -1, jm: [2]int{-1, -1}, lm: [2]int{-1, -1}}
	var det []int
	for m, ml := range l.Members {
		if ml.Variational {
			if c.vm < 0 {
				c.vm = m
			}
			continue
		}
		if c.dm < 0 {
			c.dm = m
		}
		det = append(det, m)
	}
	if len(det) >= 2 {
		c.jm = [2]int{det[0], det[1]}
	}
	for m := 1; m < len(l.Members) && c.lm[0] < 0; m++ {
		for k := range m {
			if l.Members[k].Numel != l.Members[m].Numel {
				c.lm = [2]int{k, m}
				break
			}
		}
	}
	c.next()
	return c
}

// unmet says why the host cannot run a case with needs n ("" if it can).
func (c *conf) unmet(n needs) string {
	switch {
	case n&needMembers != 0 && len(c.l.Members) < 2:
		return "needs two members"
	case n&needLayouts != 0 && c.lm[0] < 0:
		return "needs two members of different layouts"
	case n&needVariational != 0 && c.vm < 0:
		return "needs a variational member"
	case n&needDeterministic != 0 && c.dm < 0:
		return "needs a deterministic member"
	case n&needJoint != 0 && c.jm[0] < 0:
		return "needs two deterministic members"
	case n&needBaseSGD != 0 && !c.opts.BaseSGD:
		return "needs a plain SGD base optimizer (HostTestOptions.BaseSGD)"
	case n&needMomentum != 0 && c.opts.Momentum == 0:
		return "needs an SGD base optimizer with momentum (HostTestOptions.Momentum)"
	case n&needSamples != 0 && c.l.BatchSize < 2:
		return fmt.Sprintf("needs a batch of 2 samples or more, not %d", c.l.BatchSize)
	case n&needBatchMeans != 0 && c.opts.BatchNorm:
		return "the members use batch statistics (HostTestOptions.BatchNorm)"
	case n&needBatchMeans != 0 && (c.l.BatchSize < 2 || c.l.BatchSize%2 != 0):
		return fmt.Sprintf("needs an even batch size, not %d", c.l.BatchSize)
	}
	return ""
}

// p is the program being built.
func (c *conf) p() *optim.Program { return c.progs[len(c.progs)-1].p }

// cur is the index of the program being built.
func (c *conf) cur() int { return len(c.progs) - 1 }

// next starts a new program (a new Exec).
func (c *conf) next() { c.progs = append(c.progs, &program{p: c.hs.Prog()}) }

// n is the length of member m's vectors.
func (c *conf) n(m int) int64 { return c.l.Members[m].Numel }

// member returns the member whose layout v has (or whose layout a factor
// vector v is a factor layout of).
func (c *conf) member(v optim.Vec) int { return c.layoutOf(v).Member }

// layoutOf returns the layout of the vector v names.
func (c *conf) layoutOf(v optim.Vec) optim.VecLayout {
	if m, ok := v.Member(); ok {
		return optim.VecLayout{Member: m}
	}
	if m, ok := v.Rho(); ok {
		return optim.VecLayout{Member: m}
	}
	l, ok := c.owner[v]
	if !ok {
		c.t.Fatalf("suite bug: handle %d has no layout", v)
	}
	return l
}

// numel is the length of the vector v names.
func (c *conf) numel(v optim.Vec) int64 { return c.l.Of(c.layoutOf(v)).Numel }

// alloc appends the allocation of a new vector of member m.
func (c *conf) alloc(m int, name string) optim.Vec {
	return c.allocL(optim.VecLayout{Member: m}, name)
}

// allocL appends the allocation of a new vector of layout l (a factor
// vector when l has a shape).
func (c *conf) allocL(l optim.VecLayout, name string) optim.Vec {
	if c.progs[len(c.progs)-1].fail != nil {
		c.t.Fatal("suite bug: an allocation after the op expected to fail")
	}
	v := c.hs.New(name)
	c.owner[v] = l
	c.p().AllocFactor(v, l.Member, l.Shape, l.Block)
	return v
}

// like allocates a new vector of v's layout.
func (c *conf) like(v optim.Vec, name string) optim.Vec { return c.allocL(c.layoutOf(v), name) }

// filled allocates a vector of member m filled with x.
func (c *conf) filled(m int, name string, x float64) optim.Vec {
	v := c.alloc(m, name)
	c.p().Fill(v, optim.K(x))
	return v
}

// randn allocates a vector of member m of N(0, 1) draws with seed.
func (c *conf) randn(m int, name string, seed int64) optim.Vec {
	v := c.alloc(m, name)
	c.p().RandN(v, 1, seed)
	return v
}

// one returns member m's vector of ones (allocated on first use).
func (c *conf) one(m int) optim.Vec { return c.oneOf(optim.VecLayout{Member: m}) }

// oneOf returns the vector of ones of layout l (allocated on first use).
func (c *conf) oneOf(l optim.VecLayout) optim.Vec {
	if v, ok := c.ones[l]; ok {
		return v
	}
	v := c.allocL(l, fmt.Sprintf("ones[%d]", l.Member))
	c.p().Fill(v, optim.K(1))
	c.ones[l] = v
	return v
}

// read returns the ref of register r of the program being built: exec
// appends a Read op of it (once) to the program.
func (c *conf) read(r optim.Reg) ref {
	pr := c.progs[c.cur()]
	if !slices.Contains(pr.reads, r) {
		pr.reads = append(pr.reads, r)
	}
	return ref{c.cur(), r}
}

func (c *conf) dot(a, b optim.Vec) ref { return c.read(c.p().Dot(a, b)) }
func (c *conf) norm(x optim.Vec) ref   { return c.read(c.p().Norm(x)) }

// sum returns the ref of Σ x_i.
func (c *conf) sum(x optim.Vec) ref { return c.dot(x, c.oneOf(c.layoutOf(x))) }

// grad appends a Grad op. At a vector of a variational member it passes
// the member's shared noise vector as Eps, so that every pass of the case
// is a function of At alone.
func (c *conf) grad(out, at optim.Vec, b optim.Batch, bn optim.BNMode) evalRef {
	return c.eval(c.gradOp(out, at, b, bn))
}

// gradOp is grad without reading its registers.
func (c *conf) gradOp(out, at optim.Vec, b optim.Batch, bn optim.BNMode) optim.Eval {
	g := optim.Grad{Out: out, At: at, Batch: b, BN: bn}
	if m := c.member(at); c.l.Members[m].Variational {
		eps, ok := c.noise[m]
		if !ok {
			eps = c.alloc(m, fmt.Sprintf("eps[%d]", m))
			c.p().RandN(eps, 1, 99)
			c.noise[m] = eps
		}
		g.Eps = eps
	}
	return c.p().GradOp(g)
}

func (c *conf) joint(outs, ats []optim.Vec, b optim.Batch, bn optim.BNMode) evalRef {
	return c.eval(c.p().JointGrad(outs, ats, b, bn))
}

// eval returns the refs of a gradient pass's registers.
func (c *conf) eval(ev optim.Eval) evalRef { return evalRef{c.read(ev.Loss), c.read(ev.Acc)} }

// fails expects the last op that build appends to fail, with an error
// message that contains mention ("": any message). Ops appended after it
// must not run.
func (c *conf) fails(mention string, build func(p *optim.Program)) {
	c.expectFailure(failure{mention: mention}, build)
}

// unsupported expects the last op that build appends to fail with an
// error that wraps errors.ErrUnsupported.
func (c *conf) unsupported(build func(p *optim.Program)) {
	c.expectFailure(failure{unsupported: true}, build)
}

// vecFails expects the last op that build appends to fail with an
// *optim.VecError whose message contains mention.
func (c *conf) vecFails(mention string, build func(p *optim.Program)) {
	c.expectFailure(failure{mention: mention, vec: true}, build)
}

// refused expects the program being built to fail before any of its ops
// runs (Program.Err), with an error that contains mention.
func (c *conf) refused(mention string) {
	pr := c.progs[len(c.progs)-1]
	if pr.fail != nil {
		c.t.Fatal("suite bug: two failures expected in one program")
	}
	if pr.p.Err() == nil {
		c.t.Fatal("suite bug: the program has no builder error")
	}
	pr.fail = &failure{index: -1, mention: mention}
}

func (c *conf) expectFailure(f failure, build func(p *optim.Program)) {
	pr := c.progs[len(c.progs)-1]
	if pr.fail != nil {
		c.t.Fatal("suite bug: two failures expected in one program")
	}
	build(pr.p)
	f.index = len(pr.p.Ops) - 1
	pr.fail = &f
}

func (c *conf) expect(what string, fn func(get func(ref) float64) error) {
	c.checks = append(c.checks, check{what: what, fn: fn})
}

// expectScalar expects register r to hold want.
func (c *conf) expectScalar(what string, r ref, want float64) {
	c.expect(what, func(get func(ref) float64) error {
		if got := get(r); !c.close(got, want) {
			return fmt.Errorf("got %.17g, want %.17g", got, want)
		}
		return nil
	})
}

// expectEqual expects registers a and b to hold the same value.
func (c *conf) expectEqual(what string, a, b ref) {
	c.expect(what, func(get func(ref) float64) error {
		if x, y := get(a), get(b); !c.close(x, y) {
			return fmt.Errorf("%.17g ≠ %.17g", x, y)
		}
		return nil
	})
}

// expectEval expects two gradient passes to emit the same loss and
// accuracy.
func (c *conf) expectEval(what string, a, b evalRef) {
	c.expectEqual(what+": loss", a.loss, b.loss)
	c.expectEqual(what+": accuracy", a.acc, b.acc)
}

// expectConst expects every element of x to be want: the mean Σx/n and the
// root mean square ‖x‖/√n of x are want and |want|.
func (c *conf) expectConst(what string, x optim.Vec, want float64) {
	n := float64(c.numel(x))
	s, q := c.sum(x), c.norm(x)
	c.expect(what, func(get func(ref) float64) error {
		mean, rms := get(s)/n, get(q)/math.Sqrt(n)
		if !c.close(mean, want) || !c.close(rms, math.Abs(want)) {
			return fmt.Errorf("mean %.17g and rms %.17g, want every element %.17g", mean, rms, want)
		}
		return nil
	})
}

// expectSame expects vectors a and b (of one member) to be equal: ‖a − b‖
// is finite and at most Tol·(‖a‖ + ‖b‖).
func (c *conf) expectSame(what string, a, b optim.Vec) {
	d := c.like(a, "diff")
	c.p().LinComb(d, optim.Term{Coef: optim.K(1), X: a}, optim.Term{Coef: optim.K(-1), X: b})
	nd, na, nb := c.norm(d), c.norm(a), c.norm(b)
	c.expect(what, func(get func(ref) float64) error {
		// A non-finite difference fails even against an infinite scale.
		if diff, scale := get(nd), get(na)+get(nb); !(diff <= c.opts.Tol*scale) || math.IsInf(diff, 0) {
			return fmt.Errorf("‖a − b‖ = %.6g for ‖a‖ + ‖b‖ = %.6g", diff, scale)
		}
		return nil
	})
}

// expectDiffer expects vectors a and b to differ somewhere.
func (c *conf) expectDiffer(what string, a, b optim.Vec) {
	d := c.like(a, "diff")
	c.p().LinComb(d, optim.Term{Coef: optim.K(1), X: a}, optim.Term{Coef: optim.K(-1), X: b})
	nd := c.norm(d)
	c.expect(what, func(get func(ref) float64) error {
		if !(get(nd) > 0) {
			return fmt.Errorf("‖a − b‖ = %v", get(nd))
		}
		return nil
	})
}

// expectFinite expects register r to hold a finite number.
func (c *conf) expectFinite(what string, r ref) {
	c.expect(what, func(get func(ref) float64) error {
		if x := get(r); math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("got %v", x)
		}
		return nil
	})
}

// close reports whether got is want to the suite's tolerance (NaN matches
// NaN, an infinity only itself).
func (c *conf) close(got, want float64) bool {
	switch {
	case math.IsNaN(want) || math.IsNaN(got):
		return math.IsNaN(want) && math.IsNaN(got)
	case math.IsInf(want, 0) || math.IsInf(got, 0):
		return got == want
	}
	return math.Abs(got-want) <= c.opts.Tol*max(1, math.Abs(want))
}

// exec runs the case's programs and checks what they gave.
func (c *conf) exec() {
	c.t.Helper()
	ctx := context.Background()
	for i, pr := range c.progs {
		if len(pr.p.Ops) == 0 {
			continue
		}
		for _, x := range pr.reads {
			pr.p.Read(x)
		}
		r, err := c.h.Exec(ctx, pr.p)
		if pr.fail == nil {
			if err != nil {
				c.t.Fatalf("program %d failed: %v\n%s", i, err, pr.p)
			}
			if want := numReads(pr.p); len(r.Reads) != want {
				c.t.Fatalf("program %d: %d values read, want %d (its Read ops)\n%s", i, len(r.Reads), want, pr.p)
			}
			pr.res, pr.ok = r, true
			continue
		}
		if err := c.checkFailure(pr, err); err != nil {
			c.t.Fatalf("program %d: %v\n%s", i, err, pr.p)
		}
	}
	get := func(r ref) float64 {
		pr := c.progs[r.prog]
		if !pr.ok {
			c.t.Fatalf("suite bug: a check reads program %d, which failed", r.prog)
		}
		v, err := pr.res.Lookup(r.r)
		if err != nil {
			c.t.Fatalf("program %d: %v", r.prog, err)
		}
		return v
	}
	for _, ck := range c.checks {
		if err := ck.fn(get); err != nil {
			c.t.Errorf("%s: %v", ck.what, err)
		}
	}
}

// numReads is the number of p's Read ops.
func numReads(p *optim.Program) int {
	n := 0
	for _, op := range p.Ops {
		if _, ok := op.(optim.Read); ok {
			n++
		}
	}
	return n
}

// checkFailure checks the error of a program expected to fail.
func (c *conf) checkFailure(pr *program, err error) error {
	f := pr.fail
	if f.index < 0 {
		switch {
		case err == nil:
			return fmt.Errorf("succeeded; want it refused (%v)", pr.p.Err())
		case !strings.Contains(err.Error(), f.mention):
			return fmt.Errorf("error %q does not mention %q", err, f.mention)
		}
		return nil
	}
	want := optim.OpName(pr.p.Ops[f.index])
	if err == nil {
		return fmt.Errorf("succeeded; want op %d (%s) to fail", f.index, want)
	}
	var oe *optim.OpError
	if !errors.As(err, &oe) {
		return fmt.Errorf("error %q (%T) is not an *optim.OpError", err, err)
	}
	if oe.Index != f.index || oe.Op != want {
		return fmt.Errorf("error %q names op %d (%s); want op %d (%s)", err, oe.Index, oe.Op, f.index, want)
	}
	if oe.Err == nil {
		return fmt.Errorf("*optim.OpError without a cause: %q", err)
	}
	if f.mention != "" && !strings.Contains(oe.Err.Error(), f.mention) {
		return fmt.Errorf("error %q does not mention %q", err, f.mention)
	}
	if f.unsupported && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("error %q does not wrap errors.ErrUnsupported", err)
	}
	var ve *optim.VecError
	if f.vec && !errors.As(err, &ve) {
		return fmt.Errorf("error %q does not wrap an *optim.VecError", err)
	}
	return nil
}

// unknownOp is an op kind no host knows (it borrows isOp from Fill).
type unknownOp struct{ optim.Fill }

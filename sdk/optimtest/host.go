// Package optimtest is an exact float64 reference implementation of
// optim.Host in pure Go, plus a harness that drives an optim.Optimizer
// against it, so optimizer algorithms can be tested without libtorch or a
// GPU.
//
// A Host holds M members that share one toy Problem (a quadratic, a linear
// loss, or a small MLP on a seeded synthetic dataset with real minibatches).
// It implements every op of optim.Program with the documented semantics,
// records every executed program and every gradient evaluation for
// assertions, and counts BatchNorm Update/Freeze passes per member (the toy
// models have no BatchNorm, so the mode has no numeric effect).
//
// The JointGrad op of protocol minor 2 (one cross-entropy loss on the
// average of several members' softmax probabilities) needs a problem that
// implements SampleClassifier, such as the MLP; the host has no label
// smoothing, so its targets are one-hot, as in Grad.
//
// Members made variational with WithVariational follow protocol minor 1:
// their live parameters are the means μ of a mean-field Gaussian posterior
// with σ = softplus(ρ) (handle optim.RhoOf(m)), a Grad pass evaluates the
// problem at W = μ + σ⊙κ and adds β·KL/N to the loss, and the Samples
// predictive with Std = 0 averages over draws of W (see WithVariational).
//
// Typical use:
//
//	h, err := optimtest.NewHost(optimtest.NewMLP(optimtest.MLPConfig{Hidden: 8}),
//		optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9}))
//	outs, err := optimtest.Run(ctx, sam.New(), h, 10, optimtest.WithLR(0.1))
//
// Run only needs an optim.Optimizer, so the same test can drive an
// optimizer served over the plugin transport.
package optimtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/optlab/optlab/sdk/opset"
	"github.com/optlab/optlab/sdk/optim"
)

// BaseOptimizer configures what the BaseStep op does (PyTorch semantics).
//
// SGD: d = g + wd·θ; with momentum μ ≠ 0, buf = d on the member's first
// step and buf = μ·buf + (1−dampening)·d afterwards, then d = d + μ·buf
// (Nesterov) or d = buf; finally θ = θ − lr·d.
//
// Adam: g = g + wd·θ (coupled L2); m = β1·m + (1−β1)·g;
// v = β2·v + (1−β2)·g²; θ = θ − lr/(1−β1ᵗ) · m / (√v/√(1−β2ᵗ) + eps).
type BaseOptimizer struct {
	// Adam selects Adam; otherwise SGD.
	Adam        bool
	Momentum    float64
	Dampening   float64
	Nesterov    bool
	WeightDecay float64
	// Beta1, Beta2, Eps are Adam's; zero values mean 0.9, 0.999, 1e-8.
	Beta1, Beta2, Eps float64
}

// HostOption configures NewHost.
type HostOption func(*hostConfig)

type hostConfig struct {
	members   int
	seed      int64
	batchSize int
	trainSize int64
	base      BaseOptimizer
	init      map[int][]float64
	vari      map[int]variational
}

// WithMembers sets the number of members (default 1).
func WithMembers(n int) HostOption { return func(c *hostConfig) { c.members = n } }

// WithSeed seeds the host: the data loader order, the members' initial
// parameters, and the RandN stream used for Seed = 0 (default 1).
func WithSeed(seed int64) HostOption { return func(c *hostConfig) { c.seed = seed } }

// WithBatchSize sets the minibatch size. For problems with data the loader
// drops the last incomplete batch of each epoch; the default is
// min(32, Samples). For data-free problems it is only reported in Layout.
func WithBatchSize(n int) HostOption { return func(c *hostConfig) { c.batchSize = n } }

// WithTrainSize overrides Layout.TrainSize (e.g. to test a prior that
// depends on N with a data-free loss). The loader is not affected.
func WithTrainSize(n int64) HostOption { return func(c *hostConfig) { c.trainSize = n } }

// WithBase sets the base optimizer used by BaseStep (default plain SGD).
func WithBase(b BaseOptimizer) HostOption { return func(c *hostConfig) { c.base = b } }

// WithParams sets member m's initial parameters instead of Problem.Init.
func WithParams(m int, theta []float64) HostOption {
	return func(c *hostConfig) { c.init[m] = slices.Clone(theta) }
}

// MemberStats counts what happened to one member.
type MemberStats struct {
	// BNUpdate and BNFreeze count Grad passes at the member's vectors, and
	// JointGrad passes the member takes part in, by BatchNorm mode.
	BNUpdate, BNFreeze int
	// BaseSteps counts BaseStep ops applied to the member's live
	// parameters (the means μ of a variational member).
	BaseSteps int
	// RhoSteps counts BaseStep ops applied to a variational member's ρ.
	RhoSteps int
	// BNRecomputed counts UpdateBN ops at the member's vectors (its live
	// parameters or a vector of its layout).
	BNRecomputed int
}

// ExecRecord is one Exec call as the host saw it.
type ExecRecord struct {
	// Step is the step of the last BeginStep, or -1 before the first one
	// (e.g. programs sent from Configure).
	Step int64
	// Program is a deep copy of the program.
	Program optim.Program
	// Regs are the values of the program's scalar registers in order, up
	// to the failing op on error (NaN for a segment register); what the
	// program could have read.
	Regs []float64
	// Reads are the values its Read ops returned (none on error).
	Reads []float64
	// Reports are the metrics its Report ops reported.
	Reports map[string]float64
	// Err is the error Exec returned, if any.
	Err error
}

// GradRecord is one evaluation of a Grad op.
type GradRecord struct {
	Step   int64
	Member int
	// At is a copy of the point the gradient was taken at.
	At []float64
	// Grad is a copy of the gradient.
	Grad []float64
	// Samples are the training sample indices used (nil for data-free
	// problems).
	Samples []int
	BN      optim.BNMode
	// Loss is the pass's loss: the problem's mean loss, plus β·KL/N for a
	// variational member.
	Loss, Acc float64

	// The fields below are set by passes of variational members only.

	// Weights is the weight sample W = μ + σ⊙κ the problem was evaluated
	// at (At holds the means μ; BatchNorm elements have W = μ).
	Weights []float64
	// Eps is the standard-normal noise κ of the pass.
	Eps []float64
	// Rho is the member's ρ during the pass.
	Rho []float64
	// GradRho is ∂Loss/∂ρ (zero on BatchNorm elements).
	GradRho []float64
	// KL is the summed KL term of the pass before the β/N factor.
	KL float64

	// Losses are the per-sample losses a pass with OutLosses wrote (minor
	// 10), in batch order (0 where a Rank selection left a sample out).
	Losses []float64
	// ForwardOnly marks a pass with OutLosses and no Out: no backward (the
	// host's Grad field is still set, for tests).
	ForwardOnly bool

	// Joint is, for the records of a JointGrad pass (one per entry of Ats,
	// in order, sharing Samples, BN, Loss and Acc: the joint loss and the
	// accuracy of the averaged probabilities), the number of members in
	// the pass; 0 for a Grad pass. Grad is then the gradient of the joint
	// loss with respect to this member's At.
	Joint int
}

type member struct {
	theta  []float64
	lr     float64
	lrSet  bool
	opt    baseState // base optimizer state of θ (μ)
	stats  MemberStats
	vari   *variational // nil for a deterministic member
	rho    []float64    // ρ of a variational member
	rhoOpt baseState    // base optimizer state of ρ
	bn     int          // label of the running statistics (see BNStats)
}

// baseState is the base optimizer's state for one vector.
type baseState struct {
	buf, m, v []float64
	t         int
}

type vector struct {
	data   []float64
	layout optim.VecLayout
	bn     int // label of the statistics a Copy with BN gave it; 0: none
}

// Host is an exact float64 implementation of optim.Host. It is safe for
// concurrent use.
type Host struct {
	mu        sync.Mutex
	prob      Problem
	base      BaseOptimizer
	seed      int64
	batchSize int
	trainSize int64
	members   []*member
	vecs      map[optim.Vec]*vector
	rng       *rand.Rand
	step      int64
	stepLR    float64
	batch     []int
	permEpoch int64
	perm      []int
	execs     []ExecRecord
	grads     []GradRecord
	bnLabels  int                // the last label given to running statistics
	reports   map[string]float64 // reported since TakeReports
	// det marks the elements that stay deterministic in variational
	// members (tensors of Kind "bn").
	det []bool
	// ownsUpdate: the optimizer declared optim.Features.OwnsUpdate (Harness
	// sets it from Info), so BaseStep and SetLR fail, as on the real host.
	ownsUpdate bool
}

var _ optim.Host = (*Host)(nil)

// NewHost returns a host whose members all minimize p.
func NewHost(p Problem, opts ...HostOption) (*Host, error) {
	c := hostConfig{members: 1, seed: 1, init: map[int][]float64{}, vari: map[int]variational{}}
	for _, o := range opts {
		o(&c)
	}
	if p == nil || p.Numel() <= 0 {
		return nil, errors.New("optimtest: problem with no parameters")
	}
	if c.members < 1 {
		return nil, fmt.Errorf("optimtest: %d members", c.members)
	}
	if c.base.Beta1 == 0 {
		c.base.Beta1 = 0.9
	}
	if c.base.Beta2 == 0 {
		c.base.Beta2 = 0.999
	}
	if c.base.Eps == 0 {
		c.base.Eps = 1e-8
	}
	n := p.Samples()
	if c.batchSize == 0 && n > 0 {
		c.batchSize = min(32, n)
	}
	if n > 0 && (c.batchSize < 1 || c.batchSize > n) {
		return nil, fmt.Errorf("optimtest: batch size %d for %d samples", c.batchSize, n)
	}
	if c.trainSize == 0 {
		c.trainSize = int64(n)
	}
	h := &Host{
		prob: p, base: c.base, seed: c.seed, batchSize: c.batchSize, trainSize: c.trainSize,
		vecs: map[optim.Vec]*vector{}, step: -1, permEpoch: -1,
		rng: rand.New(rand.NewPCG(uint64(c.seed), 0x6f70746c6162)),
	}
	for m := range c.members {
		theta := make([]float64, p.Numel())
		if x0, ok := c.init[m]; ok {
			if len(x0) != len(theta) {
				return nil, fmt.Errorf("optimtest: WithParams(%d): %d values for %d parameters", m, len(x0), len(theta))
			}
			copy(theta, x0)
		} else {
			p.Init(mix(uint64(c.seed), uint64(m)), theta)
		}
		h.members = append(h.members, &member{theta: theta})
		h.updateStats(m)
	}
	for m := range c.init {
		if m < 0 || m >= c.members {
			return nil, fmt.Errorf("optimtest: WithParams(%d) with %d members", m, c.members)
		}
	}
	if err := h.initVariational(c.vari); err != nil {
		return nil, err
	}
	h.loadBatch(0)
	return h, nil
}

// mix is splitmix64 of a combination of a and b.
func mix(a, b uint64) uint64 {
	z := a + 0x9e3779b97f4a7c15*(b+1)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// StepsPerEpoch is the loader's number of batches per epoch (0 for
// data-free problems).
func (h *Host) StepsPerEpoch() int64 {
	if n := h.prob.Samples(); n > 0 {
		return int64(n / h.batchSize)
	}
	return 0
}

// loadBatch selects the minibatch of a step: epoch e uses a permutation of
// the training set seeded by (seed, e), cut into batchSize pieces.
func (h *Host) loadBatch(step int64) {
	spe := h.StepsPerEpoch()
	if spe == 0 {
		h.batch = nil
		return
	}
	epoch, k := step/spe, int(step%spe)
	if epoch != h.permEpoch {
		r := rand.New(rand.NewPCG(uint64(h.seed), mix(0xda7a, uint64(epoch))))
		h.perm, h.permEpoch = r.Perm(h.prob.Samples()), epoch
	}
	h.batch = h.perm[k*h.batchSize : (k+1)*h.batchSize]
}

// BeginStep starts a training step: it selects the step's minibatch, sets
// the schedule's learning rate in.LR for BaseStep and clears SetLR
// overrides. The harness calls it before every Optimizer.Step, as the real
// host does.
func (h *Host) BeginStep(in optim.StepInput) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.step, h.stepLR = in.Step, in.LR
	h.reports = nil
	for _, m := range h.members {
		m.lrSet = false
	}
	h.loadBatch(max(in.Step, 0))
}

// Layout implements optim.Host.
func (h *Host) Layout(ctx context.Context) (optim.Layout, error) {
	if err := ctx.Err(); err != nil {
		return optim.Layout{}, fmt.Errorf("optimtest: layout: %w", err)
	}
	l := optim.Layout{TrainSize: h.trainSize, BatchSize: int64(h.batchSize)}
	for _, m := range h.members {
		l.Members = append(l.Members, optim.MemberLayout{
			Arch: h.prob.Name(), Numel: int64(h.prob.Numel()), Tensors: h.prob.Tensors(),
			Variational: m.vari != nil,
		})
	}
	return l, nil
}

// Exec implements optim.Host: it runs the ops in order, each checked first
// by opset.Checker, and stops at the first failing op, with an
// *optim.OpError that names it. Effects of the ops before it remain. Every
// call is recorded (see Execs).
func (h *Host) Exec(ctx context.Context, p *optim.Program) (optim.Result, error) {
	if err := ctx.Err(); err != nil {
		return optim.Result{}, fmt.Errorf("optimtest: exec: %w", err)
	}
	if p == nil {
		p = &optim.Program{}
	}
	if err := p.Err(); err != nil {
		return optim.Result{}, fmt.Errorf("optimtest: exec: %w", err)
	}
	l, err := h.Layout(ctx)
	if err != nil {
		return optim.Result{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	rec := ExecRecord{Step: h.step, Program: cloneProgram(p)}
	x := &execState{check: opset.NewChecker(p, l), full: l}
	var blocks opset.Blocks
	for i, op := range p.Ops {
		err = x.check.Check(i, op, h.allocated)
		switch o, isIf := op.(optim.If); {
		case err != nil:
		case blocks.Skipped(i):
			h.skip(op, x)
		case isIf:
			blocks.If(i, o, x.regs[o.X.Index()-1].v > 0)
		default:
			err = h.apply(op, x)
		}
		if err != nil {
			err = &optim.OpError{Index: i, Op: optim.OpName(op), Err: err}
			break
		}
	}
	for _, r := range x.regs {
		v := r.v
		if r.seg != nil {
			v = math.NaN()
		}
		rec.Regs = append(rec.Regs, v)
	}
	var res optim.Result
	if err == nil {
		res, err = opset.NewResult(p, x.reads)
		rec.Reads, rec.Reports = x.reads, x.reports
		for name, v := range x.reports {
			if _, dup := h.reports[name]; dup && h.step >= 0 {
				err = fmt.Errorf("optimtest: metric %q reported twice in step %d", name, h.step)
			}
			if h.reports == nil {
				h.reports = map[string]float64{}
			}
			h.reports[name] = v
		}
	}
	rec.Err = err
	h.execs = append(h.execs, rec)
	return res, err
}

// TakeReports returns the metrics that Report ops reported since the last
// call (or BeginStep) and forgets them: the harness merges them into the
// step's output, as the host's training loop does. A name may be reported
// once per step; before the first BeginStep (a host driven without steps) a
// later report replaces an earlier one.
func (h *Host) TakeReports() map[string]float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.reports
	h.reports = nil
	return r
}

// allocated tells which layout an allocated vector has.
func (h *Host) allocated(v optim.Vec) (optim.VecLayout, bool) {
	x, ok := h.vecs[v]
	if !ok {
		return optim.VecLayout{}, false
	}
	return x.layout, true
}

// layoutOf returns the layout of the vector v names (checked): a member's,
// or an allocated vector's (a factor layout, say).
func (h *Host) layoutOf(x *execState, v optim.Vec) optim.MemberLayout {
	if m, ok := v.Rho(); ok {
		return x.full.Members[m]
	}
	if m, ok := v.Member(); ok {
		return x.full.Members[m]
	}
	return x.full.Of(h.vecs[v].layout)
}

// execState is the state of one Exec: its registers, reads and reports.
type execState struct {
	check   *opset.Checker
	full    optim.Layout // the members' layout
	regs    []register
	reads   []float64
	reports map[string]float64
}

// register is a register's value: a scalar, or one value per segment
// (seg, with its segment of every element in of).
type register struct {
	v   float64
	seg []float64
	of  []int
}

func (x *execState) set(r register) { x.regs = append(x.regs, r) }

func (x *execState) scalar(v float64) { x.set(register{v: v}) }

// num returns an operand's value as a register (an immediate is a scalar).
func (x *execState) num(n optim.Num) register {
	if k, ok := opset.Imm(n); ok {
		return register{v: k}
	}
	return x.regs[n.(optim.Reg).Index()-1]
}

// at returns the value of register r for element i of a vector.
func (r register) at(i int) float64 {
	if r.seg != nil {
		return r.seg[r.of[i]]
	}
	return r.v
}

// segmentOf returns the segment of every element under by.
func segmentOf(l optim.MemberLayout, by optim.Segmentation) (sizes []int64, of []int) {
	sizes = l.Segments(by)
	for _, s := range l.SegmentOf(by) {
		of = append(of, int(s))
	}
	return sizes, of
}

func cloneProgram(p *optim.Program) optim.Program {
	ops := make([]optim.Op, len(p.Ops))
	for i, op := range p.Ops {
		switch o := op.(type) {
		case optim.LinComb:
			o.Terms = slices.Clone(o.Terms)
			op = o
		case optim.JointGrad:
			o.Outs, o.Ats = slices.Clone(o.Outs), slices.Clone(o.Ats)
			op = o
		}
		ops[i] = op
	}
	return optim.Program{Ops: ops}
}

// BNStats returns the label of the BatchNorm running statistics that v
// carries: for live parameters their member's current ones, for a vector
// the ones a Copy with BN gave it (ok false when it has none). The toy
// problems have no BatchNorm, so statistics are labels: every Grad or
// JointGrad pass in BNUpdate mode gives its members' statistics a new label
// (each member starts with a label of its own), and a Copy with BN carries labels as the host
// carries statistics. Tests use it to check that a snapshot holds the
// statistics of the moment it was taken.
func (h *Host) BNStats(v optim.Vec) (label int, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m, isMember := v.Member(); isMember && m < len(h.members) {
		return h.members[m].bn, true
	}
	if x, found := h.vecs[v]; found && x.bn != 0 {
		return x.bn, true
	}
	return 0, false
}

// updateStats gives member m's running statistics a new label (a BNUpdate pass).
func (h *Host) updateStats(m int) {
	h.bnLabels++
	h.members[m].bn = h.bnLabels
}

// updateBN runs an UpdateBN: the toy problems have no BatchNorm, so the
// statistics that X carries get a new label (those of a vector become its
// own, as after a Copy with BN), and its member's BNRecomputed count
// grows.
func (h *Host) updateBN(op optim.UpdateBN) error {
	if _, ok := op.X.Rho(); ok {
		return fmt.Errorf("update_bn of ρ handle %d: X must hold parameters", op.X)
	}
	_, m, err := h.lookup(op.X)
	if err != nil {
		return err
	}
	h.bnLabels++
	if mi, ok := op.X.Member(); ok {
		h.members[mi].bn = h.bnLabels
	} else {
		h.vecs[op.X].bn = h.bnLabels
	}
	h.members[m].stats.BNRecomputed++
	return nil
}

// copyStats carries the statistics of a Copy (see optim.Copy); it checks
// everything before changing anything.
func (h *Host) copyStats(op optim.Copy) error {
	dv := h.vecs[op.Dst]
	if !op.BN {
		if dv != nil {
			dv.bn = 0
		}
		return nil
	}
	var label int
	if m, ok := op.Src.Member(); ok {
		label = h.members[m].bn
	} else if sv := h.vecs[op.Src]; sv != nil && sv.bn != 0 {
		label = sv.bn
	} else {
		return fmt.Errorf("copy with BN: handle %d holds no statistics", op.Src)
	}
	if m, ok := op.Dst.Member(); ok {
		h.members[m].bn = label
		return nil
	}
	if dv == nil {
		return fmt.Errorf("copy with BN: handle %d is a ρ vector, which holds none", op.Dst)
	}
	dv.bn = label
	return nil
}

// lookup resolves a handle to its data and owning member.
func (h *Host) lookup(v optim.Vec) ([]float64, int, error) {
	if m, ok := v.Rho(); ok {
		if m >= len(h.members) {
			return nil, 0, fmt.Errorf("ρ handle %d: no member %d", v, m)
		}
		if h.members[m].vari == nil {
			return nil, 0, fmt.Errorf("ρ handle %d: member %d is not variational", v, m)
		}
		return h.members[m].rho, m, nil
	}
	if m, ok := v.Member(); ok {
		if m >= len(h.members) {
			return nil, 0, fmt.Errorf("handle %d: no member %d", v, m)
		}
		return h.members[m].theta, m, nil
	}
	x, ok := h.vecs[v]
	if !ok {
		return nil, 0, fmt.Errorf("handle %d is not allocated", v)
	}
	return x.data, x.layout.Member, nil
}

func (h *Host) get(v optim.Vec) ([]float64, error) {
	d, _, err := h.lookup(v)
	return d, err
}

// get2 resolves a destination and a source handle.
func (h *Host) get2(dst, src optim.Vec) ([]float64, []float64, error) {
	d, err := h.get(dst)
	if err != nil {
		return nil, nil, err
	}
	s, err := h.get(src)
	return d, s, err
}

// apply runs one op of a program: the ops that set registers (or the
// Exec's reads and reports) here, the others in applyVecOp.
func (h *Host) apply(op optim.Op, x *execState) error {
	switch op := op.(type) {
	case optim.Dot:
		return h.dot(op, x)
	case optim.Norm:
		return h.norm(op, x)
	case optim.Grad:
		return h.grad(op, x)
	case optim.JointGrad:
		return h.jointGrad(op, x)
	case optim.Arith:
		x.set(arith(op, x))
	case optim.SegReduce:
		return h.segReduce(op, x)
	case optim.Read:
		x.reads = append(x.reads, x.regs[op.X.Index()-1].v)
	case optim.Report:
		return h.report(op, x)
	case nil:
		return errors.New("nil op")
	default:
		return h.applyVecOp(op, x)
	}
	return nil
}

// applyVecOp runs an op that allocates, frees or writes vectors, or
// changes the host's optimizer state.
func (h *Host) applyVecOp(op optim.Op, x *execState) error {
	switch op := op.(type) {
	case optim.Alloc:
		return h.alloc(op)
	case optim.Free:
		return h.free(op)
	case optim.Copy:
		return h.copyVec(op)
	case optim.Fill:
		return h.withOperand(x, op.Dst, op.Value, func(_, c float64) float64 { return c })
	case optim.FillRange:
		return h.fillRange(op)
	case optim.Scale:
		return h.withOperand(x, op.Dst, op.Alpha, func(d, c float64) float64 { return d * c })
	case optim.AddConst:
		return h.withOperand(x, op.Dst, op.Value, func(d, c float64) float64 { return d + c })
	case optim.Axpy:
		return h.axpy(op, x)
	case optim.LinComb:
		return h.linComb(op, x)
	case optim.Unary:
		return h.unary(op)
	case optim.Binary:
		return h.binary(op)
	case optim.RandN:
		return h.randN(op)
	case optim.TopKMask:
		return h.topKMask(op, x)
	case optim.BaseStep:
		return h.baseStep(op)
	case optim.BaseState:
		return h.baseState(op)
	case optim.SetLR:
		return h.setLR(op)
	case optim.UpdateBN:
		return h.updateBN(op)
	case optim.NewtonSchulz:
		return h.newtonSchulz(op, x)
	case optim.Gram:
		return h.gram(op, x)
	case optim.MatMul:
		return h.matMul(op, x)
	case optim.MatFunc:
		return h.matFunc(op, x)
	case optim.SortColumns:
		return h.sortColumns(op, x)
	default:
		return fmt.Errorf("unknown op %T: %w", op, errors.ErrUnsupported)
	}
}

// alloc runs an Alloc: a zeroed vector of member op.Member under the new
// handle op.ID.
func (h *Host) alloc(op optim.Alloc) error {
	if op.ID <= 0 {
		return fmt.Errorf("alloc of reserved handle %d", op.ID)
	}
	if _, ok := h.vecs[op.ID]; ok {
		return fmt.Errorf("handle %d is already allocated", op.ID)
	}
	if op.Member < 0 || int(op.Member) >= len(h.members) {
		return fmt.Errorf("alloc for member %d of %d", op.Member, len(h.members))
	}
	l, err := h.Layout(context.Background())
	if err != nil {
		return err
	}
	vl := optim.VecLayout{Member: int(op.Member), Shape: op.Shape, Block: op.Block}
	h.vecs[op.ID] = &vector{data: make([]float64, l.Of(vl).Numel), layout: vl}
	return nil
}

// free runs a Free: handle op.ID is forgotten.
func (h *Host) free(op optim.Free) error {
	if _, ok := h.vecs[op.ID]; !ok || op.ID <= 0 {
		return fmt.Errorf("free of handle %d, which is not allocated", op.ID)
	}
	delete(h.vecs, op.ID)
	return nil
}

// copyVec runs a Copy: the source's values, and its statistics as
// copyStats carries them.
func (h *Host) copyVec(op optim.Copy) error {
	d, s, err := h.get2(op.Dst, op.Src)
	if err != nil {
		return err
	}
	if err := h.copyStats(op); err != nil {
		return err
	}
	copy(d, s)
	return nil
}

// withOperand runs an op that sets every element of vector dst to
// f(element, operand n's value for it): Fill, Scale and AddConst.
func (h *Host) withOperand(x *execState, dst optim.Vec, n optim.Num, f func(d, c float64) float64) error {
	d, err := h.get(dst)
	if err != nil {
		return err
	}
	c := x.num(n)
	for i := range d {
		d[i] = f(d[i], c.at(i))
	}
	return nil
}

// fillRange runs a FillRange: op.Len elements from op.Offset set to
// op.Value.
func (h *Host) fillRange(op optim.FillRange) error {
	d, err := h.get(op.Dst)
	if err != nil {
		return err
	}
	if n := int64(len(d)); op.Offset < 0 || op.Len < 0 || op.Offset > n-op.Len {
		return fmt.Errorf("fill range: [%d, %d+%d) is outside a vector of %d", op.Offset, op.Offset, op.Len, n)
	}
	for i := range op.Len {
		d[op.Offset+i] = op.Value
	}
	return nil
}

// axpy runs an Axpy: dst += α·x.
func (h *Host) axpy(op optim.Axpy, x *execState) error {
	d, v, err := h.get2(op.Dst, op.X)
	if err != nil {
		return err
	}
	c := x.num(op.Alpha)
	for i := range d {
		d[i] += c.at(i) * v[i]
	}
	return nil
}

// unary runs a Unary: dst = f(src) elementwise.
func (h *Host) unary(op optim.Unary) error {
	d, s, err := h.get2(op.Dst, op.Src)
	if err != nil {
		return err
	}
	f, err := unaryFunc(op.Kind)
	if err != nil {
		return err
	}
	for i := range d {
		d[i] = f(s[i])
	}
	return nil
}

// binary runs a Binary: dst = f(a, b) elementwise.
func (h *Host) binary(op optim.Binary) error {
	d, err := h.get(op.Dst)
	if err != nil {
		return err
	}
	a, b, err := h.get2(op.A, op.B)
	if err != nil {
		return err
	}
	f, err := binaryFunc(op.Kind)
	if err != nil {
		return err
	}
	for i := range d {
		d[i] = f(a[i], b[i])
	}
	return nil
}

// randN runs a RandN: Gaussian noise of standard deviation op.Std, from
// the host's generator or, with a seed, from a generator of its own.
func (h *Host) randN(op optim.RandN) error {
	d, err := h.get(op.Dst)
	if err != nil {
		return err
	}
	r := h.rng
	if op.Seed != 0 {
		r = rand.New(rand.NewPCG(uint64(op.Seed), 0x72616e646e))
	}
	for i := range d {
		d[i] = op.Std * r.NormFloat64()
	}
	return nil
}

// dot runs a Dot: a scalar register of a·b.
func (h *Host) dot(op optim.Dot, x *execState) error {
	a, b, err := h.get2(op.A, op.B)
	if err != nil {
		return err
	}
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	x.scalar(s)
	return nil
}

// norm runs a Norm: a scalar register of ‖x‖₂.
func (h *Host) norm(op optim.Norm, x *execState) error {
	v, err := h.get(op.X)
	if err != nil {
		return err
	}
	var s float64
	for _, e := range v {
		s += e * e
	}
	x.scalar(math.Sqrt(s))
	return nil
}

// report runs a Report: a metric, once per program and per step.
func (h *Host) report(op optim.Report, x *execState) error {
	if _, dup := x.reports[op.Name]; dup {
		return fmt.Errorf("metric %q reported twice in one program", op.Name)
	}
	if _, dup := h.reports[op.Name]; dup && h.step >= 0 {
		return fmt.Errorf("metric %q already reported in this step", op.Name)
	}
	if x.reports == nil {
		x.reports = map[string]float64{}
	}
	x.reports[op.Name] = x.regs[op.X.Index()-1].v
	return nil
}

// setLR runs a SetLR: member op.Member's learning rate from now on.
func (h *Host) setLR(op optim.SetLR) error {
	if h.ownsUpdate {
		return errOwnsUpdate("set lr")
	}
	if op.Member < 0 || int(op.Member) >= len(h.members) {
		return fmt.Errorf("set lr of member %d of %d", op.Member, len(h.members))
	}
	if math.IsNaN(op.LR) || op.LR < 0 {
		return fmt.Errorf("set lr of member %d: invalid learning rate %v", op.Member, op.LR)
	}
	m := h.members[op.Member]
	m.lr, m.lrSet = op.LR, true
	return nil
}

func (h *Host) linComb(op optim.LinComb, x *execState) error {
	d, err := h.get(op.Dst)
	if err != nil {
		return err
	}
	acc := make([]float64, len(d))
	for k, t := range op.Terms {
		v, err := h.get(t.X)
		if err != nil {
			return fmt.Errorf("term %d: %w", k, err)
		}
		c := x.num(t.Coef)
		for i := range acc {
			if k == 0 {
				acc[i] = c.at(i) * v[i]
			} else {
				acc[i] += c.at(i) * v[i]
			}
		}
	}
	copy(d, acc)
	return nil
}

// arith computes an Arith op in float64, elementwise over segments when an
// operand is a segment register.
func arith(op optim.Arith, x *execState) register {
	a, b, c := x.num(op.A), x.num(op.B), x.num(op.C)
	f := op.Kind.Apply
	var seg register
	for _, r := range []register{a, b, c} {
		if r.seg != nil {
			seg = r
		}
	}
	if seg.seg == nil {
		return register{v: f(a.v, b.v, c.v)}
	}
	out := register{seg: make([]float64, len(seg.seg)), of: seg.of}
	pick := func(r register, s int) float64 {
		if r.seg != nil {
			return r.seg[s]
		}
		return r.v
	}
	for s := range out.seg {
		out.seg[s] = f(pick(a, s), pick(b, s), pick(c, s))
	}
	return out
}

// segReduce computes a SegReduce op.
func (h *Host) segReduce(op optim.SegReduce, x *execState) error {
	v, err := h.get(op.X)
	if err != nil {
		return err
	}
	var w []float64
	if op.Kind == optim.SegDot {
		if w, err = h.get(op.Y); err != nil {
			return err
		}
	}
	sizes, of := segmentOf(h.layoutOf(x, op.X), op.By)
	r := register{seg: make([]float64, len(sizes)), of: of}
	for i, e := range v {
		s := of[i]
		switch op.Kind {
		case optim.SegSumSq:
			r.seg[s] += e * e
		case optim.SegDot:
			r.seg[s] += e * w[i]
		case optim.SegSumAbs:
			r.seg[s] += math.Abs(e)
		case optim.SegMaxAbs:
			r.seg[s] = math.Max(r.seg[s], math.Abs(e))
		}
	}
	x.set(r)
	return nil
}

// topKMask computes a TopKMask op: per segment, the k = ⌊frac·size+½⌋
// (clamped) largest |x|, ties to the lower index.
func (h *Host) topKMask(op optim.TopKMask, x *execState) error {
	d, v, err := h.get2(op.Dst, op.X)
	if err != nil {
		return err
	}
	frac := x.num(op.Frac)
	sizes, of := segmentOf(h.layoutOf(x, op.X), op.By)
	members := make([][]int, len(sizes)) // each segment's elements, in order
	for i, s := range of {
		members[s] = append(members[s], i)
	}
	for s, n := range sizes {
		f := frac.v
		if frac.seg != nil {
			f = frac.seg[s]
		}
		k := int(math.Floor(f*float64(n) + 0.5))
		k = min(max(k, 0), int(n))
		idx := slices.Clone(members[s])
		slices.SortStableFunc(idx, func(a, b int) int {
			switch aa, bb := math.Abs(v[a]), math.Abs(v[b]); {
			case aa > bb:
				return -1
			case aa < bb:
				return 1
			}
			return 0
		})
		for j, i := range idx {
			d[i] = 0
			if j < k {
				d[i] = 1
			}
		}
	}
	return nil
}

// newtonSchulz runs a NewtonSchulz op in float64 (NewtonSchulzRef).
func (h *Host) newtonSchulz(op optim.NewtonSchulz, x *execState) error {
	d, s, err := h.get2(op.Dst, op.Src)
	if err != nil {
		return err
	}
	copy(d, NewtonSchulzRef(h.layoutOf(x, op.Src), s, op))
	return nil
}

func unaryFunc(k optim.UnaryKind) (func(float64) float64, error) {
	switch k {
	case optim.Abs:
		return math.Abs, nil
	case optim.Sign:
		return func(x float64) float64 {
			switch {
			case x > 0:
				return 1
			case x < 0:
				return -1
			}
			return x // ±0 and NaN, as torch.sign
		}, nil
	case optim.Sqrt:
		return math.Sqrt, nil
	case optim.Square:
		return func(x float64) float64 { return x * x }, nil
	case optim.Softplus:
		// Stable log(1+eˣ); torch's threshold-20 linearisation is not copied.
		return func(x float64) float64 { return max(x, 0) + math.Log1p(math.Exp(-math.Abs(x))) }, nil
	case optim.Exp:
		return math.Exp, nil
	case optim.Log:
		return math.Log, nil
	case optim.Reciprocal:
		return func(x float64) float64 { return 1 / x }, nil
	}
	return nil, fmt.Errorf("unknown unary kind %d: %w", k, errors.ErrUnsupported)
}

func binaryFunc(k optim.BinaryKind) (func(a, b float64) float64, error) {
	switch k {
	case optim.Mul:
		return func(a, b float64) float64 { return a * b }, nil
	case optim.Div:
		return func(a, b float64) float64 { return a / b }, nil
	case optim.Add:
		return func(a, b float64) float64 { return a + b }, nil
	case optim.Sub:
		return func(a, b float64) float64 { return a - b }, nil
	case optim.Max:
		return math.Max, nil
	case optim.Min:
		return math.Min, nil
	}
	return nil, fmt.Errorf("unknown binary kind %d: %w", k, errors.ErrUnsupported)
}

// samples returns the training samples a Batch selects from the current
// minibatch (nil for data-free problems, after validating b).
func (h *Host) samples(b optim.Batch) ([]int, error) {
	of := max(b.Of, 1)
	if b.Of < 0 || b.Part < 0 || b.Part >= of {
		return nil, fmt.Errorf("batch part %d of %d", b.Part, b.Of)
	}
	if h.batch == nil {
		return nil, nil
	}
	if of == 1 {
		return slices.Clone(h.batch), nil
	}
	size := len(h.batch) / int(of)
	if size == 0 {
		return nil, fmt.Errorf("batch of %d samples cannot be cut into %d parts", len(h.batch), of)
	}
	order := slices.Clone(h.batch)
	if b.Shuffle != 0 {
		r := rand.New(rand.NewPCG(uint64(b.Shuffle), 0x73687566))
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	return order[int(b.Part)*size : int(b.Part+1)*size], nil
}

func (h *Host) grad(op optim.Grad, x *execState) error {
	if _, ok := op.At.Rho(); ok {
		return fmt.Errorf("grad at ρ handle %d: At must hold parameters (a variational member's means μ)", op.At)
	}
	at, owner, err := h.lookup(op.At)
	if err != nil {
		return err
	}
	mem := h.members[owner]
	var out, outRho, eps []float64
	if op.Out < 0 {
		return fmt.Errorf("grad with Out %d: want an allocated vector (> 0) or 0", op.Out)
	}
	if op.Out != 0 {
		if out, err = h.get(op.Out); err != nil {
			return err
		}
	}
	if mem.vari == nil && (op.Eps != 0 || op.OutRho != 0) {
		return fmt.Errorf("grad with Eps %d and OutRho %d at member %d, which is not variational", op.Eps, op.OutRho, owner)
	}
	if op.Eps < 0 || op.OutRho < 0 {
		return fmt.Errorf("grad with Eps %d and OutRho %d: want allocated vectors (> 0) or 0", op.Eps, op.OutRho)
	}
	if op.OutRho != 0 {
		if outRho, err = h.get(op.OutRho); err != nil {
			return err
		}
	}
	if op.Eps != 0 {
		if eps, err = h.get(op.Eps); err != nil {
			return err
		}
	}
	s, err := h.samples(op.Batch)
	if err != nil {
		return err
	}
	var losses []float64 // OutLosses' data, and the batch s was before a Rank selection
	batch := s
	if op.OutLosses != 0 || op.Rank != 0 {
		if batch, s, losses, err = h.rankSamples(op, s); err != nil {
			return err
		}
	}
	st := &mem.stats
	switch op.BN {
	case optim.BNUpdate:
		st.BNUpdate++
		h.updateStats(owner)
	case optim.BNFreeze:
		st.BNFreeze++
	default:
		return fmt.Errorf("unknown BN mode %d: %w", op.BN, errors.ErrUnsupported)
	}
	g := make([]float64, len(at))
	rec := GradRecord{Step: h.step, Member: owner, At: slices.Clone(at), Samples: s, BN: op.BN}
	if mem.vari == nil {
		rec.Loss, rec.Acc = h.prob.Loss(at, s, g)
	} else {
		if eps == nil { // a fresh draw from the run's host stream
			eps = make([]float64, len(at))
			for i := range eps {
				eps[i] = h.rng.NormFloat64()
			}
		}
		rec.Eps, rec.Rho = slices.Clone(eps), slices.Clone(mem.rho)
		rec.GradRho = make([]float64, len(at))
		rec.Loss, rec.Acc, rec.KL, rec.Weights = h.varLoss(mem, at, eps, s, g, rec.GradRho)
		if outRho != nil {
			copy(outRho, rec.GradRho)
		}
	}
	rec.Grad = slices.Clone(g)
	if losses != nil {
		clear(losses)
		for i, b := range batch {
			if slices.Contains(s, b) {
				losses[i], _ = h.prob.Loss(at, []int{b}, nil)
			}
		}
		rec.Losses = slices.Clone(losses)
	}
	rec.ForwardOnly = op.OutLosses != 0 && op.Out == 0
	h.grads = append(h.grads, rec)
	if out != nil {
		copy(out, g)
	}
	x.scalar(rec.Loss)
	x.scalar(rec.Acc)
	return nil
}

// rankSamples returns, for a Grad with OutLosses or Rank (minor 10) on the
// whole batch s, the batch, the samples of the pass (the batch, or the Keep
// samples of largest Rank, ties to the lower position, in batch order),
// and OutLosses' data (nil without).
//
// A data-free problem (whose Loss ignores its samples) has a batch of
// Layout.BatchSize virtual samples 0…BatchSize−1, each of the whole loss.
func (h *Host) rankSamples(op optim.Grad, s []int) (batch, sub []int, losses []float64, err error) {
	if s == nil && h.prob.Samples() == 0 {
		s = make([]int, h.batchSize)
		for i := range s {
			s[i] = i
		}
	}
	if op.OutLosses != 0 {
		d, err := h.get(op.OutLosses)
		if err != nil {
			return nil, nil, nil, err
		}
		losses = d
		if len(s) != len(d) {
			return nil, nil, nil, fmt.Errorf("grad: a batch of %d samples; sample vectors hold %d", len(s), len(d))
		}
	}
	if op.Rank == 0 {
		return s, s, losses, nil
	}
	r, err := h.get(op.Rank)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(s) != len(r) {
		return nil, nil, nil, fmt.Errorf("grad: a batch of %d samples; sample vectors hold %d", len(s), len(r))
	}
	if op.Keep < 1 || int(op.Keep) > len(s) {
		return nil, nil, nil, fmt.Errorf("grad: keep = %d of a batch of %d", op.Keep, len(s))
	}
	pos := make([]int, len(s))
	for i := range pos {
		pos[i] = i
	}
	slices.SortStableFunc(pos, func(a, b int) int { return cmpDesc(r[a], r[b]) })
	pos = pos[:op.Keep]
	slices.Sort(pos)
	sub = make([]int, len(pos))
	for i, p := range pos {
		sub[i] = s[p]
	}
	return s, sub, losses, nil
}

// cmpDesc orders a before b when a is larger (NaN largest, as torch.topk).
func cmpDesc(a, b float64) int {
	switch {
	case a == b || (math.IsNaN(a) && math.IsNaN(b)):
		return 0
	case math.IsNaN(a) || a > b:
		return -1
	}
	return 1
}

// jointGrad implements optim.JointGrad. With p̄ = (1/M)Σₘ pₘ the average of
// the members' softmax probabilities and one-hot targets (the test host has
// no label smoothing, as its Grad), the loss is L = −(1/n)Σᵢ log p̄ᵢ,yᵢ and
// its gradient with respect to member m's logits is
// ∂L/∂zₘᵢ = (1/n)·rₘᵢ·(pₘᵢ − e_yᵢ) with rₘᵢ = pₘᵢ,yᵢ/(M·p̄ᵢ,yᵢ), the
// member's share of the averaged probability of the label; the rest is each
// member's own backpropagation. As the real host (and the OT-MDR reference
// code's EnsembleWrap), p̄ is clamped at 1e-40 before the log: a clamped
// sample adds −log 1e-40 to the loss and nothing to the gradient. Outs may
// be empty (no gradients) or have one entry per Ats.
func (h *Host) jointGrad(op optim.JointGrad, x *execState) error {
	c, ok := h.prob.(SampleClassifier)
	if !ok {
		return fmt.Errorf("joint grad: problem %s is not a SampleClassifier", h.prob.Name())
	}
	n := len(op.Ats)
	if n == 0 || (len(op.Outs) != 0 && len(op.Outs) != n) {
		return fmt.Errorf("joint grad with %d Ats and %d Outs: want at least one At, and no Outs or one per At", n, len(op.Outs))
	}
	ats, outs, owners := make([][]float64, n), make([][]float64, n), make([]int, n)
	for i, v := range op.Ats {
		if _, ok := v.Rho(); ok {
			return fmt.Errorf("joint grad: Ats[%d] is ρ handle %d", i, v)
		}
		at, owner, err := h.lookup(v)
		if err != nil {
			return fmt.Errorf("joint grad: Ats[%d]: %w", i, err)
		}
		if h.members[owner].vari != nil {
			return fmt.Errorf("joint grad: Ats[%d] belongs to member %d, which is variational", i, owner)
		}
		if j := slices.Index(owners[:i], owner); j >= 0 {
			return fmt.Errorf("joint grad: Ats[%d] and Ats[%d] both belong to member %d", j, i, owner)
		}
		ats[i], owners[i] = at, owner
		if len(op.Outs) == 0 {
			continue
		}
		if o := op.Outs[i]; o != 0 {
			if o < 0 || slices.Contains(op.Outs[:i], o) {
				return fmt.Errorf("joint grad: Outs[%d] = %d: want a distinct allocated vector (> 0) or 0", i, o)
			}
			if outs[i], err = h.get(o); err != nil {
				return fmt.Errorf("joint grad: Outs[%d]: %w", i, err)
			}
		}
	}
	if op.BN != optim.BNUpdate && op.BN != optim.BNFreeze {
		return fmt.Errorf("unknown BN mode %d: %w", op.BN, errors.ErrUnsupported)
	}
	s, err := h.samples(op.Batch)
	if err != nil {
		return err
	}
	for _, owner := range owners {
		if op.BN == optim.BNUpdate {
			h.members[owner].stats.BNUpdate++
			h.updateStats(owner)
		} else {
			h.members[owner].stats.BNFreeze++
		}
	}
	k, inv, invM := c.Classes(), 1/float64(len(s)), 1/float64(n)
	probs, avg, dz := newMatrix(n, k), make([]float64, k), make([]float64, k)
	grads := newMatrix(n, len(ats[0]))
	var loss, correct float64
	for _, smp := range s {
		y := c.TrainLabel(smp)
		clear(avg)
		for i, at := range ats {
			c.TrainProbs(at, smp, probs[i])
			for o := range avg {
				avg[o] += invM * probs[i][o]
			}
		}
		const floor = 1e-40
		loss -= math.Log(max(avg[y], floor))
		if argmax(avg) == y {
			correct++
		}
		if avg[y] < floor {
			continue
		}
		for i, at := range ats {
			r := inv * invM * probs[i][y] / avg[y]
			for o := range dz {
				dz[o] = r * probs[i][o]
			}
			dz[y] -= r
			c.BackpropLogits(at, smp, dz, grads[i])
		}
	}
	loss, acc := loss*inv, correct*inv
	for i := range ats {
		h.grads = append(h.grads, GradRecord{Step: h.step, Member: owners[i], At: slices.Clone(ats[i]),
			Grad: grads[i], Samples: slices.Clone(s), BN: op.BN, Loss: loss, Acc: acc, Joint: n})
	}
	for i, out := range outs {
		if out != nil {
			copy(out, grads[i])
		}
	}
	x.scalar(loss)
	x.scalar(acc)
	return nil
}

func (h *Host) baseStep(op optim.BaseStep) error {
	if h.ownsUpdate {
		return errOwnsUpdate("base step")
	}
	mi, isRho := op.Params.Rho()
	if !isRho {
		var ok bool
		if mi, ok = op.Params.Member(); !ok {
			return fmt.Errorf("base step on %d, which is not a member's live parameters or ρ", op.Params)
		}
	}
	if mi >= len(h.members) {
		return fmt.Errorf("base step on %d: no member %d", op.Params, mi)
	}
	m := h.members[mi]
	if isRho && m.vari == nil {
		return fmt.Errorf("base step on ρ handle %d: member %d is not variational", op.Params, mi)
	}
	gv, err := h.get(op.Grad)
	if err != nil {
		return err
	}
	lr := h.stepLR
	if m.lrSet {
		lr = m.lr
	}
	if isRho { // ρ has its own state and no weight decay
		m.stats.RhoSteps++
		h.applyBase(m.rho, gv, &m.rhoOpt, lr, 0)
		return nil
	}
	m.stats.BaseSteps++
	h.applyBase(m.theta, gv, &m.opt, lr, h.base.WeightDecay)
	return nil
}

// baseState copies a vector of the base optimizer's state of op.Of into
// op.Dst (zeros before its first step).
func (h *Host) baseState(op optim.BaseState) error {
	if h.ownsUpdate {
		return errOwnsUpdate("base state")
	}
	mi, isRho := op.Of.Rho()
	if !isRho {
		var ok bool
		if mi, ok = op.Of.Member(); !ok {
			return fmt.Errorf("base state of %d, which is not a member's live parameters or ρ", op.Of)
		}
	}
	m := h.members[mi]
	st := &m.opt
	if isRho {
		st = &m.rhoOpt
	}
	base := "sgd"
	if h.base.Adam {
		base = "adam"
	}
	if err := opset.BaseStateRefusal(base, h.base.Momentum, op.Name); err != nil {
		return err
	}
	dst, err := h.get(op.Dst)
	if err != nil {
		return err
	}
	src := st.buf
	switch op.Name {
	case optim.ExpAvg:
		src = st.m
	case optim.ExpAvgSq:
		src = st.v
	}
	if src == nil {
		clear(dst)
		return nil
	}
	copy(dst, src)
	return nil
}

// applyBase applies one step of the base optimizer to theta with gradient
// gv, state st, learning rate lr and weight decay wd.
func (h *Host) applyBase(theta, gv []float64, st *baseState, lr, wd float64) {
	b := h.base
	d := make([]float64, len(theta))
	for i := range d {
		d[i] = gv[i] + wd*theta[i]
	}
	if b.Adam {
		if st.m == nil {
			st.m, st.v = make([]float64, len(theta)), make([]float64, len(theta))
		}
		st.t++
		bc1 := 1 - math.Pow(b.Beta1, float64(st.t))
		bc2 := math.Sqrt(1 - math.Pow(b.Beta2, float64(st.t)))
		for i := range theta {
			st.m[i] = b.Beta1*st.m[i] + (1-b.Beta1)*d[i]
			st.v[i] = b.Beta2*st.v[i] + (1-b.Beta2)*d[i]*d[i]
			theta[i] -= lr / bc1 * st.m[i] / (math.Sqrt(st.v[i])/bc2 + b.Eps)
		}
		return
	}
	if b.Momentum != 0 {
		if st.buf == nil {
			st.buf = slices.Clone(d)
		} else {
			for i := range d {
				st.buf[i] = b.Momentum*st.buf[i] + (1-b.Dampening)*d[i]
			}
		}
		for i := range d {
			if b.Nesterov {
				d[i] += b.Momentum * st.buf[i]
			} else {
				d[i] = st.buf[i]
			}
		}
	}
	for i := range theta {
		theta[i] -= lr * d[i]
	}
}

// Members is the number of members.
func (h *Host) Members() int { return len(h.members) }

// Problem returns the host's problem.
func (h *Host) Problem() Problem { return h.prob }

// Params returns a copy of member m's live parameters (nil if there is no
// member m).
func (h *Host) Params(m int) []float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m < 0 || m >= len(h.members) {
		return nil
	}
	return slices.Clone(h.members[m].theta)
}

// Vec returns a copy of the contents of handle v.
func (h *Host) Vec(v optim.Vec) ([]float64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, err := h.get(v)
	if err != nil {
		return nil, fmt.Errorf("optimtest: %w", err)
	}
	return slices.Clone(d), nil
}

// SetVec overwrites the contents of handle v (a live parameter handle or an
// allocated one), as a host restoring a checkpoint does.
func (h *Host) SetVec(v optim.Vec, data []float64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, err := h.get(v)
	if err != nil {
		return fmt.Errorf("optimtest: %w", err)
	}
	if len(data) != len(d) {
		return fmt.Errorf("optimtest: %d values for handle %d of %d", len(data), v, len(d))
	}
	copy(d, data)
	return nil
}

// Handles returns the allocated handles in increasing order.
func (h *Host) Handles() []optim.Vec {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]optim.Vec, 0, len(h.vecs))
	for v := range h.vecs {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// Stats returns member m's counters.
func (h *Host) Stats(m int) MemberStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m < 0 || m >= len(h.members) {
		return MemberStats{}
	}
	return h.members[m].stats
}

// LR returns the learning rate BaseStep would use for member m now (NaN if
// there is no member m).
func (h *Host) LR(m int) float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m < 0 || m >= len(h.members) {
		return math.NaN()
	}
	if mm := h.members[m]; mm.lrSet {
		return mm.lr
	}
	return h.stepLR
}

// Batch returns the current minibatch's sample indices (nil for data-free
// problems).
func (h *Host) Batch() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.batch)
}

// Execs returns the recorded Exec calls in order. The records share memory
// with the host's log: read them, do not modify them.
func (h *Host) Execs() []ExecRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.execs)
}

// ExecCount returns the number of Exec calls recorded during step (-1 for
// those before the first BeginStep).
func (h *Host) ExecCount(step int64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, e := range h.execs {
		if e.Step == step {
			n++
		}
	}
	return n
}

// ReadCount returns the number of values that Read ops of the programs
// executed during step step read back: the blocking device-to-host reads a
// real host would make (every built-in method makes none).
func (h *Host) ReadCount(step int64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, e := range h.execs {
		if e.Step == step {
			n += len(e.Reads)
		}
	}
	return n
}

// Grads returns the recorded gradient evaluations in order. The records
// share memory with the host's log: read them, do not modify them.
func (h *Host) Grads() []GradRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.grads)
}

// Eval is the score of a predictive distribution on the test set.
type Eval struct {
	// NLL is the mean negative log of the averaged probability of the label.
	NLL float64
	// Acc is the accuracy of the averaged probabilities.
	Acc float64
}

// Evaluate scores a predictive distribution on the problem's test set, as
// the real host does after training: Point uses member 0's parameters,
// Members averages the probabilities of the listed vectors, Samples
// averages over N draws Mean + Std⊙ξ (drawn from a stream of their own, so
// evaluation does not disturb training). Samples with Std = 0 averages the
// probabilities of N draws of a variational member's weights W = μ + σ⊙ξ,
// with μ the vector Mean (e.g. optim.Params) and σ = softplus(ρ) of the
// member that owns it (BatchNorm elements stay at μ). The problem must be
// a Classifier.
func (h *Host) Evaluate(ctx context.Context, p optim.Predictive) (Eval, error) {
	if err := ctx.Err(); err != nil {
		return Eval{}, fmt.Errorf("optimtest: evaluate: %w", err)
	}
	c, ok := h.prob.(Classifier)
	if !ok {
		return Eval{}, fmt.Errorf("optimtest: evaluate: problem %s is not a Classifier", h.prob.Name())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var thetas [][]float64
	var weights []float64
	switch p.Kind {
	case optim.Point:
		thetas = [][]float64{h.members[0].theta}
	case optim.Members:
		for _, v := range p.Vecs {
			if _, ok := v.Rho(); ok {
				return Eval{}, fmt.Errorf("optimtest: evaluate: ρ handle %d is not a parameter vector", v)
			}
			d, err := h.get(v)
			if err != nil {
				return Eval{}, fmt.Errorf("optimtest: evaluate: %w", err)
			}
			thetas = append(thetas, d)
		}
		weights = p.Weights
		if weights != nil && len(weights) != len(thetas) {
			return Eval{}, fmt.Errorf("optimtest: evaluate: %d weights for %d vectors", len(weights), len(thetas))
		}
	case optim.Samples:
		if p.Std == 0 {
			var err error
			if thetas, err = h.variationalSamples(p.Mean, p.N); err != nil {
				return Eval{}, fmt.Errorf("optimtest: evaluate: %w", err)
			}
			break
		}
		mean, std, err := h.get2(p.Mean, p.Std)
		if err != nil {
			return Eval{}, fmt.Errorf("optimtest: evaluate: %w", err)
		}
		r := rand.New(rand.NewPCG(uint64(h.seed), 0xe7a1))
		for range p.N {
			t := make([]float64, len(mean))
			for i := range t {
				t[i] = mean[i] + std[i]*r.NormFloat64()
			}
			thetas = append(thetas, t)
		}
	default:
		return Eval{}, fmt.Errorf("optimtest: evaluate: unknown predictive kind %d", p.Kind)
	}
	if len(thetas) == 0 {
		return Eval{}, errors.New("optimtest: evaluate: empty predictive")
	}
	labels := c.TestLabels()
	avg, probs := newMatrix(len(labels), c.Classes()), newMatrix(len(labels), c.Classes())
	for k, t := range thetas {
		w := 1 / float64(len(thetas))
		if weights != nil {
			w = weights[k]
		}
		c.TestProbs(t, probs)
		for i := range avg {
			for j := range avg[i] {
				avg[i][j] += w * probs[i][j]
			}
		}
	}
	var e Eval
	for i, y := range labels {
		e.NLL -= math.Log(avg[i][y])
		if argmax(avg[i]) == y {
			e.Acc++
		}
	}
	e.NLL /= float64(len(labels))
	e.Acc /= float64(len(labels))
	return e, nil
}

func newMatrix(r, c int) [][]float64 {
	m := make([][]float64, r)
	for i := range m {
		m[i] = make([]float64, c)
	}
	return m
}

// errOwnsUpdate is the error of a BaseStep or SetLR (op) from an optimizer
// that declared optim.Features.OwnsUpdate: the real host fails the run for
// it.
func errOwnsUpdate(op string) error {
	return fmt.Errorf("%s: the optimizer declared the %q feature (it applies its own update; the run has no base optimizer), so it may not send this op", op, "owns-update")
}

// setOwnsUpdate makes BaseStep and SetLR fail from now on (Harness, for an
// optimizer that declared optim.Features.OwnsUpdate).
func (h *Host) setOwnsUpdate(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ownsUpdate = on
}

// gram runs a Gram op in float64 (GramRef).
func (h *Host) gram(op optim.Gram, x *execState) error {
	d, s, err := h.get2(op.Dst, op.Src)
	if err != nil {
		return err
	}
	dl := h.vecs[op.Dst].layout
	GramRef(d, x.full.Of(dl), dl.Shape == optim.LeftFactor, s, x.full.TilesOf(h.vecLayout(op.Src), dl.Block), op)
	return nil
}

// vecLayout returns the VecLayout of the vector v names (checked).
func (h *Host) vecLayout(v optim.Vec) optim.VecLayout {
	if m, ok := v.Rho(); ok {
		return optim.VecLayout{Member: m}
	}
	if m, ok := v.Member(); ok {
		return optim.VecLayout{Member: m}
	}
	return h.vecs[v].layout
}

// matMul runs a MatMul op in float64 (MatMulRef).
func (h *Host) matMul(op optim.MatMul, x *execState) error {
	d, s, err := h.get2(op.Dst, op.Src)
	if err != nil {
		return err
	}
	var block int64
	var left, right []float64
	var lf, rf optim.MemberLayout
	if op.Right != 0 {
		right, rf, block = h.vecs[op.Right].data, h.layoutOf(x, op.Right), h.vecs[op.Right].layout.Block
	}
	if op.Left != 0 {
		left, lf, block = h.vecs[op.Left].data, h.layoutOf(x, op.Left), h.vecs[op.Left].layout.Block
	}
	MatMulRef(d, s, x.full.TilesOf(h.vecLayout(op.Src), block), left, lf, right, rf, op)
	return nil
}

// matFunc runs a MatFunc op in float64 (MatFuncRef) on every matrix of
// the factor vector.
func (h *Host) matFunc(op optim.MatFunc, x *execState) error {
	d, s, err := h.get2(op.Dst, op.Src)
	if err != nil {
		return err
	}
	for _, ft := range h.layoutOf(x, op.Src).Tensors {
		setSquare(d, ft, MatFuncRef(square(s, ft), op))
	}
	return nil
}

// sortColumns runs a SortColumns op in float64 (SortColumnsRef).
func (h *Host) sortColumns(op optim.SortColumns, x *execState) error {
	d, k, err := h.get2(op.Dst, op.Key)
	if err != nil {
		return err
	}
	dl := h.vecs[op.Dst].layout
	var carry []float64
	var tiles []optim.Tile
	if op.Carry != 0 {
		if carry, err = h.get(op.Carry); err != nil {
			return err
		}
		tiles = x.full.TilesOf(h.vecLayout(op.Carry), dl.Block)
	}
	SortColumnsRef(d, k, x.full.Of(dl), dl.Shape == optim.LeftFactor, carry, tiles)
	return nil
}

// skip sets the registers that op, skipped by an If, would set to NaN:
// a segment register NaN in every segment.
func (h *Host) skip(op optim.Op, x *execState) {
	var seg *register // the segmentation of a segment register it would set
	switch o := op.(type) {
	case optim.SegReduce:
		sizes, of := segmentOf(h.layoutOf(x, o.X), o.By)
		seg = &register{seg: make([]float64, len(sizes)), of: of}
	case optim.Arith:
		for _, n := range []optim.Num{o.A, o.B, o.C} {
			if r, ok := n.(optim.Reg); ok && x.regs[r.Index()-1].seg != nil {
				seg = &register{seg: make([]float64, len(x.regs[r.Index()-1].seg)), of: x.regs[r.Index()-1].of}
			}
		}
	}
	for range opset.Emits(op) {
		if seg != nil {
			r := register{seg: make([]float64, len(seg.seg)), of: seg.of}
			for i := range r.seg {
				r.seg[i] = math.NaN()
			}
			x.set(r)
			continue
		}
		x.scalar(math.NaN())
	}
}

// Package engine is the program interpreter: it executes optimizer
// programs on the device. It owns the members' flat parameter and buffer
// vectors, the vectors plugins allocate, the current minibatch and the base
// optimizer, and implements optim.Host: plugins (in-process or over gRPC)
// send programs of ops naming vector handles (ops, the base step, joint and
// variational gradients), and the engine returns the values of the
// registers they Read; Probs interprets an optimizer's predictive on one
// batch. Every torch call runs on the tensor.Worker's locked OS thread;
// engine state is touched only there, so Exec may be called from any
// goroutine.
//
// Within one Exec every value an op computes is a register on the device
// (regs.go): a 0-d float64 tensor, or one float64 per segment of a member's
// layout; coefficients that are registers use the tensor-coefficient
// kernels, immediates the scalar ones (on the CPU the two give the same
// bits). Every op is checked by opset.Checker first and runs in its own
// tensor.Scope, so its temporaries are freed when it ends. Read ops cost
// one device→host transfer at the end of the Exec; Report ops keep the
// step's metrics on the device until the training loop takes them
// (reports.go), and Counters counts Execs, ops, blocking reads and
// host→device copies. A shuffled sub-batch (Batch.Shuffle) is permuted on
// the device from its seed alone (Permutation), so no step copies anything
// to the device.
//
// What is done with an engine's vectors outside programs lives in the
// packages named for it, through the accessors of access.go: device data
// (host/data/devset), evaluation (host/eval), PyTorch state dicts
// (host/checkpoint/statedict), the training state (host/train) and
// landscape evaluation (host/landscape).
package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/opset"
	"github.com/optlab/optlab/sdk/optim"
)

// Config holds the settings the engine needs from the experiment.
type Config struct {
	Device         tensor.Device
	Seed           int64
	LabelSmoothing float64
	BNMomentum     float64 // PyTorch's BatchNorm momentum; 0.1 when zero
	// DeviceBudget, when > 0, caps the bytes of plugin-allocated vectors
	// on the device. A vector beyond it, or one the device has no memory
	// left for, fails its Alloc, unless Spill is set.
	DeviceBudget int64
	// Spill keeps a plugin vector that does not fit on the device (see
	// DeviceBudget) in host memory instead of failing its Alloc (snapshots
	// of an ensemble, say), and logs it. Every op that reads or writes a
	// spilled vector moves it, or its partners, so that the kernels see
	// one device: slower, never wrong (train.spill).
	Spill bool
	// HostBudget bounds the host memory the plugin's requests may make the
	// host hold (see Budget); nil takes HostBudget() when New runs.
	HostBudget *Budget
	// Log, when set, receives the engine's notices, one line each (every
	// spilled vector); host/train sends them to the run's log.
	Log func(line string)
	// spillTo is where spilled vectors live: the CPU (zero value); tests
	// use tensor.FakeDevice to tell the two apart on a CPU-only machine.
	spillTo tensor.Device
	// Variational, when set, makes every member a Gaussian posterior.
	Variational *Variational
	Base        BaseConfig
	TrainSize   int64
	BatchSize   int64
	// DebugNonFinite makes the engine check, after every op, the vectors
	// it wrote and the registers it set, and fail the op that first
	// produces a NaN or ±Inf (host/train sets it from the environment
	// variable OPTLAB_DEBUG_NONFINITE=1). Every check reads a flag back
	// from the device: for debugging only. A gradient pass then also
	// checks every op of the model's forward pass (runDebugged), and every
	// CPU allocation of the process starts as NaN with a NaN guard past
	// its end (tensor.FillFreshWithNaN), so that a NaN "now and then" from
	// memory no op wrote comes every time and is named.
	DebugNonFinite bool
	// MicroBatches, when > 1, computes every Grad pass of a deterministic
	// member as that many micro-batches in turn (train.micro_batches):
	// the gradient is the sum of theirs weighted by their sizes, the
	// batch's mean gradient; BatchNorm normalizes each micro-batch by its
	// own statistics and updates its running ones once per micro-batch, as
	// gradient accumulation in PyTorch does. A variational member's Grad
	// and a JointGrad fail, naming the setting.
	MicroBatches int
	// OwnsUpdate says that the optimizer applies its own update
	// (optim.Features.OwnsUpdate): Base is not used, and a BaseStep or SetLR
	// fails, naming itself.
	OwnsUpdate bool
}

// Member is one model of a run with its flat vectors on the device.
type Member struct {
	Model  *model.Model
	Params tensor.T // flat trainable parameters (owned)
	Buf    tensor.T // flat BatchNorm buffers (owned; one element when none)
	base   baseState
	lr     float64  // learning rate for BaseStep in the current step
	x, y   tensor.T // the member's current batch (owned)
	vi     *variational

	// bnBatches counts the passes that updated Buf (BNBatches).
	bnBatches int64
}

type vec struct {
	t      tensor.T
	layout optim.VecLayout // its member's parameters, or a factor layout
	host   bool            // spilled to host memory: the device was full
	// held is the bytes the vector holds in the Budget (host memory:
	// on the CPU, or spilled); 0 for one on a device.
	held int64
	// bn holds BatchNorm running statistics received by a Copy with BN
	// (a model-state snapshot); invalid when the vector has none.
	bn tensor.T
	// bnBatches counts the passes that updated bn (BNBatches).
	bnBatches int64
}

// Engine executes programs. Create it with New; Close frees its tensors.
type Engine struct {
	w   *tensor.Worker
	cfg Config
	// fillWas is whether fresh CPU allocations were filled with NaN before
	// New turned it on for DebugNonFinite (nil: New did not); Close
	// restores it.
	fillWas *bool
	members []*Member
	vecs    map[optim.Vec]*vec
	// perms are the current step's sub-batch permutations on the device,
	// by Shuffle seed and batch size (owned; dropped by BeginStep).
	perms   map[permKey]tensor.T
	spilled int     // plugin vectors living in host memory
	vecMem  int64   // bytes of plugin vectors on the device
	budget  *Budget // host memory the plugin may make the host hold
	// scripted says that a member is a TorchScript module, whose random
	// ops BeginStep seeds.
	scripted bool
	src      *rand.PCG  // state of rng, saved with the training state
	rng      *rand.Rand // host stream for RandN with seed 0
	step     int64
	count    counters
	// layout is the members' layout (Layout), fixed at New.
	layout optim.Layout
	// segCache holds the segmentations the segment ops use, by member and
	// Segmentation, built on first use; members of the same shapes share
	// one (segShared, by their sizes).
	segCache  map[segKey]*tensor.Segs
	segShared map[string]*tensor.Segs
	// reports are the metrics reported in the current step (owned).
	reports []report
	// bnData is the training set UpdateBN passes over (SetBNData).
	bnData BNData
}

// New makes an engine with one member per model, initializing parameters
// from cfg.Seed (member m uses seed cfg.Seed + m·1000003). The engine owns
// the models: Close releases them (Model.Release).
func New(ctx context.Context, w *tensor.Worker, cfg Config, models []*model.Model) (*Engine, error) {
	if cfg.BNMomentum == 0 {
		cfg.BNMomentum = 0.1
	}
	e := &Engine{w: w, cfg: cfg, vecs: map[optim.Vec]*vec{}, perms: map[permKey]tensor.T{},
		src:      rand.NewPCG(uint64(cfg.Seed), 0x6f70746c6162),
		segCache: map[segKey]*tensor.Segs{}, segShared: map[string]*tensor.Segs{}}
	e.rng = rand.New(e.src)
	e.budget = cfg.HostBudget
	if e.budget == nil {
		e.budget = HostBudget()
	}
	e.count.h2d0 = tensor.HostToDevice()
	if cfg.DebugNonFinite {
		prev, err := tensor.FillFreshWithNaN(true)
		if err != nil {
			return nil, err
		}
		e.fillWas = &prev
	}
	err := w.Do(ctx, func() error {
		for i, m := range models {
			s := tensor.NewScope()
			tensor.ManualSeed(cfg.Seed + int64(i)*1000003)
			p := s.Zeros([]int64{m.Numel}, tensor.Float32, cfg.Device)
			b := s.Zeros([]int64{max(m.BufNumel, 1)}, tensor.Float32, cfg.Device)
			m.InitParams(s, p)
			m.InitBuffers(s, b)
			mem := &Member{Model: m}
			e.scripted = e.scripted || m.IsTorchScript()
			if cfg.Variational != nil {
				e.initVariational(s, mem)
			}
			if err := s.Err(); err != nil {
				s.Close()
				return fmt.Errorf("initializing member %d (%s): %w", i, m.Arch, err)
			}
			mem.Params, mem.Buf = s.Keep(p), s.Keep(b)
			e.members = append(e.members, mem)
			s.Close()
		}
		return nil
	})
	if err != nil {
		e.Close()
		return nil, err
	}
	e.layout, _ = e.Layout(ctx)
	return e, nil
}

// Worker returns the worker the engine runs on.
func (e *Engine) Worker() *tensor.Worker { return e.w }

// Device returns the engine's device.
func (e *Engine) Device() tensor.Device { return e.cfg.Device }

// Members returns the run's members (read their tensors only on the worker).
func (e *Engine) Members() []*Member { return e.members }

// Close frees every tensor the engine owns.
func (e *Engine) Close() {
	if e.fillWas != nil { // DebugNonFinite's fill, as it was before New
		_, _ = tensor.FillFreshWithNaN(*e.fillWas)
		e.fillWas = nil
	}
	_ = e.w.Do(context.Background(), func() error {
		for _, m := range e.members {
			m.Params.Drop()
			m.Buf.Drop()
			m.Model.Release()
			m.base.drop()
			if m.vi != nil {
				m.vi.drop()
			}
		}
		for _, v := range e.vecs {
			v.t.Drop()
			v.bn.Drop()
		}
		e.vecs = map[optim.Vec]*vec{}
		e.dropSegs()
		dropReports(e.reports)
		e.reports = nil
		e.dropPerms()
		for i, m := range e.members {
			if !sharedBatch(e.members[i+1:], -1, m.x) {
				m.x.Drop()
				m.y.Drop()
			}
		}
		return nil
	})
}

// Layout describes the members' parameters.
func (e *Engine) Layout(context.Context) (optim.Layout, error) {
	l := optim.Layout{TrainSize: e.cfg.TrainSize, BatchSize: e.cfg.BatchSize}
	for _, m := range e.members {
		ml := optim.MemberLayout{Arch: m.Model.Arch, Numel: m.Model.Numel, Variational: m.vi != nil}
		for i, p := range m.Model.Params {
			ml.Tensors = append(ml.Tensors, optim.Tensor{Name: p.Name, Shape: p.Shape, Offset: m.Model.Offsets[i], Kind: p.Kind})
		}
		l.Members = append(l.Members, ml)
	}
	return l, nil
}

// BeginStep starts training step step with the schedule's learning rate:
// it resets SetLR overrides and the cached sub-batch permutations, and
// drops the metrics reported in the previous step that TakeReports did not
// take. Call it off the worker.
func (e *Engine) BeginStep(step int64, lr float64) {
	e.step = step
	for _, m := range e.members {
		m.lr = lr
	}
	_ = e.w.Do(context.Background(), func() error {
		e.dropPerms()
		dropReports(e.reports)
		e.reports = nil
		if e.scripted {
			// A TorchScript module's random ops (dropout) draw from
			// libtorch's global generator, which no saved state holds:
			// seeded from the run's seed and the step, a resumed run
			// draws what the uninterrupted one draws.
			tensor.ManualSeed(stepSeed(e.cfg.Seed, step))
		}
		return nil
	})
}

// stepSeed mixes a run's seed and a step into the seed of the step's
// draws from libtorch's global generator (SplitMix64's finalizer).
func stepSeed(seed, step int64) int64 {
	z := uint64(seed)*0x9e3779b97f4a7c15 + uint64(step) + 0x6f70746c6162
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return int64((z ^ (z >> 31)) >> 1)
}

// LR returns the learning rate member m's BaseStep uses in the current
// step: BeginStep's, or the last SetLR's override. Call it off the worker,
// between Execs (after the optimizer's Step, say).
func (e *Engine) LR(m int) float64 { return e.members[m].lr }

// SetBatch makes (x, y) member m's current batch; the engine takes
// ownership and drops the previous one. Members may share one batch (pass
// the same tensors) or each have their own data order. Call on the worker.
func (e *Engine) SetBatch(m int, x, y tensor.T) {
	mem := e.members[m]
	if mem.x.Same(x) {
		return
	}
	if mem.x.Valid() && !sharedBatch(e.members, m, mem.x) {
		mem.x.Drop()
		mem.y.Drop()
	}
	mem.x, mem.y = x, y
}

// sharedBatch tells whether another member still uses tensor x.
func sharedBatch(ms []*Member, m int, x tensor.T) bool {
	for i, o := range ms {
		if i != m && o.x.Same(x) {
			return true
		}
	}
	return false
}

// Stats returns the number of Exec calls and ops executed so far (see
// Counters for the device→host reads too).
func (e *Engine) Stats() (execs, ops int64) {
	c := e.Counters()
	return c.Execs, c.Ops
}

// Exec runs a program on the worker and returns the values of its Read ops
// (read back from the device with one transfer at the end, none when the
// program reads nothing). Every op is first checked by opset.Checker; a
// failing op stops the program with an *optim.OpError; an op kind, unary or
// binary kind, BatchNorm mode or the like that the engine does not know
// wraps errors.ErrUnsupported. A program whose builder recorded a misuse
// (Program.Err) fails before any of its ops runs.
func (e *Engine) Exec(ctx context.Context, p *optim.Program) (optim.Result, error) {
	var res optim.Result
	err := e.w.Do(ctx, func() error {
		r, err := e.exec(ctx, p)
		res = r
		return err
	})
	return res, err
}

func (e *Engine) exec(ctx context.Context, p *optim.Program) (optim.Result, error) {
	e.count.execs.Add(1)
	if p == nil {
		p = &optim.Program{}
	}
	if err := p.Err(); err != nil {
		return optim.Result{}, fmt.Errorf("program refused before it ran: %w", err)
	}
	if len(p.Ops) > optim.MaxProgramOps {
		return optim.Result{}, fmt.Errorf("program of %d ops refused: a program may hold at most %d ops; send the work in several Execs", len(p.Ops), optim.MaxProgramOps)
	}
	x := &execState{ctx: ctx, p: p, check: opset.NewChecker(p, e.layout), rs: tensor.NewScope()}
	defer x.close()
	var blocks opset.Blocks
	for i, op := range p.Ops {
		e.count.ops.Add(1)
		n := len(x.regs)
		err := x.check.Check(i, op, e.allocated)
		switch o, isIf := op.(optim.If); {
		case err != nil:
		case blocks.Skipped(i):
			err = e.skip(x, op)
		case isIf:
			var holds bool
			holds, err = e.holds(x, o)
			blocks.If(i, o, holds)
		default:
			err = e.runDebugged(x, op)
			if err == nil && e.cfg.DebugNonFinite {
				err = e.checkFinite(x, op, n)
			}
		}
		if err != nil {
			opset.NameHandles(err, p)
			return optim.Result{}, &optim.OpError{Index: i, Op: optim.OpName(op), Err: err}
		}
	}
	vals, err := e.readBack(x)
	if err != nil {
		return optim.Result{}, err
	}
	res, err := opset.NewResult(p, vals)
	if err != nil {
		return optim.Result{}, err
	}
	e.commitReports(x)
	return res, nil
}

// runDebugged is runOp, with Config.DebugNonFinite's trap on during a
// gradient pass (Grad, JointGrad): the first op of the model's forward pass
// whose output holds a NaN or an infinity fails the pass, naming the op
// and the layer (tensor.TrapNonFinite, model.Fwd.Seq), not only the loss
// the NaN reaches.
func (e *Engine) runDebugged(x *execState, op optim.Op) error {
	switch op.(type) {
	case optim.Grad, optim.JointGrad:
		if e.cfg.DebugNonFinite {
			defer tensor.TrapNonFinite(tensor.TrapNonFinite(true))
		}
	}
	return e.runOp(x, op)
}

// runOp runs one op in its own scope, which drops the op's temporaries when
// it ends; the registers the op sets move to the register file.
func (e *Engine) runOp(x *execState, op optim.Op) error {
	s := tensor.NewScope()
	defer s.Close()
	regs, err := e.run(s, x, op)
	if err == nil {
		err = s.Err()
	}
	if err != nil {
		return err
	}
	for _, r := range regs {
		r.t = x.rs.Adopt(s.Keep(r.t))
		x.regs = append(x.regs, r)
	}
	return nil
}

// allocated tells which layout plugin vector v has (the Checker's view of
// the engine's vectors).
func (e *Engine) allocated(v optim.Vec) (optim.VecLayout, bool) {
	x, ok := e.vecs[v]
	if !ok {
		return optim.VecLayout{}, false
	}
	return x.layout, true
}

// vecLayout returns the layout of the vector h names: a member's parameter
// layout for live parameters and ρ, an allocated vector's own (checked
// handles; an unknown one gives member 0's).
func (e *Engine) vecLayout(h optim.Vec) optim.VecLayout {
	if m, ok := h.Rho(); ok {
		return optim.VecLayout{Member: m}
	}
	if m, ok := h.Member(); ok {
		return optim.VecLayout{Member: m}
	}
	if v, ok := e.vecs[h]; ok {
		return v.layout
	}
	return optim.VecLayout{}
}

// get resolves a handle to its tensor and member; a handle that names no
// vector is an *optim.VecError with opset.Checker's message.
func (e *Engine) get(h optim.Vec) (tensor.T, int, error) {
	if m, ok := h.Rho(); ok {
		if m >= len(e.members) || e.members[m].vi == nil {
			return tensor.T{}, 0, &optim.VecError{Vec: h, Msg: fmt.Sprintf("names the ρ of member %d, which is not variational", m)}
		}
		return e.members[m].vi.rho, m, nil
	}
	if m, ok := h.Member(); ok {
		if m >= len(e.members) {
			return tensor.T{}, 0, &optim.VecError{Vec: h, Msg: fmt.Sprintf("names member %d; the run has %d", m, len(e.members))}
		}
		return e.members[m].Params, m, nil
	}
	v, ok := e.vecs[h]
	if !ok {
		return tensor.T{}, 0, &optim.VecError{Vec: h, Msg: "is not allocated"}
	}
	return v.t, v.layout.Member, nil
}

// same resolves two handles of the same layout; b's tensor is moved to a's
// device (within s) when a vector was spilled to host memory.
func (e *Engine) same(s *tensor.Scope, a, b optim.Vec) (tensor.T, tensor.T, error) {
	ta, ma, err := e.get(a)
	if err != nil {
		return ta, ta, err
	}
	tb, mb, err := e.get(b)
	if err != nil {
		return ta, tb, err
	}
	if ta.Numel() != tb.Numel() {
		return ta, tb, &optim.VecError{Vec: b, Msg: fmt.Sprintf("has the layout of member %d (%d elements), %s has member %d's (%d)",
			mb, tb.Numel(), (*optim.Handles)(nil).Name(a), ma, ta.Numel())}
	}
	return ta, e.align(s, tb, ta), nil
}

// align returns t on the device of like. Vectors live on the engine's
// device unless the device was full when they were allocated (see Alloc),
// so this costs nothing until a vector was spilled.
func (e *Engine) align(s *tensor.Scope, t, like tensor.T) tensor.T {
	if e.spilled == 0 || s == nil {
		return t
	}
	if d := like.Device(); d != t.Device() {
		return s.To(t, d)
	}
	return t
}

// toDevice returns t on the engine's device.
func (e *Engine) toDevice(s *tensor.Scope, t tensor.T) tensor.T {
	if e.spilled == 0 || t.Device() == e.cfg.Device {
		return t
	}
	return s.To(t, e.cfg.Device)
}

// run runs op (checked by the Checker) in scope s and returns the registers
// it sets. The Checker has resolved the handles and checked the layouts,
// kinds and registers of the ops it knows; what is checked here is what
// only the engine knows.
func (e *Engine) run(s *tensor.Scope, x *execState, op optim.Op) ([]register, error) {
	switch o := op.(type) {
	case optim.Dot:
		return e.dot(s, o)
	case optim.Norm:
		return e.norm(s, o)
	case optim.Grad, optim.JointGrad:
		return e.gradRegs(s, o)
	case optim.Arith:
		return oneReg(e.arith(s, x, o))
	case optim.SegReduce:
		return oneReg(e.segReduce(s, o))
	case optim.Read:
		x.reads = append(x.reads, x.reg(o.X).t)
		return nil, nil
	}
	return nil, e.runVecOp(s, x, op)
}

// runVecOp runs an op that sets no register: one that allocates, frees or
// writes vectors, or changes the engine's or the Exec's state.
func (e *Engine) runVecOp(s *tensor.Scope, x *execState, op optim.Op) error {
	switch o := op.(type) {
	case optim.Alloc:
		return e.allocOp(o)
	case optim.Free:
		return e.free(o)
	case optim.Copy:
		return e.copyVec(s, o)
	case optim.Fill:
		return e.withOperand(s, x, o.Dst, o.Value, s.Fill, s.FillT)
	case optim.FillRange:
		return e.fillRange(s, o)
	case optim.Scale:
		return e.withOperand(s, x, o.Dst, o.Alpha, s.ScaleInPlace, s.ScaleT)
	case optim.AddConst:
		return e.withOperand(s, x, o.Dst, o.Value, s.AddScalarInPlace, s.AddT)
	case optim.Axpy:
		return e.axpy(s, x, o)
	case optim.LinComb:
		return e.lincomb(s, x, o)
	case optim.Unary:
		return e.unary(s, o)
	case optim.Binary:
		return e.binary(s, o)
	case optim.RandN:
		return e.randN(s, o)
	case optim.BaseStep:
		return e.baseStep(s, o)
	case optim.BaseState:
		return e.baseStateOp(s, o)
	case optim.SetLR:
		return e.setLR(o)
	case optim.TopKMask:
		return e.topKMask(s, x, o)
	case optim.Report:
		return e.report(s, x, o)
	case optim.UpdateBN:
		return e.updateBN(x.ctx, o)
	case optim.NewtonSchulz:
		return e.newtonSchulz(s, o)
	case optim.Gram:
		return e.gram(s, o)
	case optim.MatMul:
		return e.matMul(s, o)
	case optim.MatFunc:
		return e.matFunc(s, o)
	case optim.SortColumns:
		return e.sortColumns(s, o)
	default:
		// The Checker refuses nil and unknown ops first.
		return fmt.Errorf("unknown op %T: %w", op, errors.ErrUnsupported)
	}
}

// oneReg returns the register an op sets as the registers of the op, or
// its error.
func oneReg(r register, err error) ([]register, error) {
	if err != nil {
		return nil, err
	}
	return []register{r}, nil
}

// allocOp runs an Alloc: a zeroed vector of member o.Member's layout, or
// of a factor layout of it, under the new handle o.ID.
func (e *Engine) allocOp(o optim.Alloc) error {
	if o.ID <= 0 {
		return fmt.Errorf("alloc: handle %d is reserved (use IDs > 0)", o.ID)
	}
	if _, ok := e.vecs[o.ID]; ok {
		return fmt.Errorf("alloc: handle %d already allocated", o.ID)
	}
	if int(o.Member) >= len(e.members) || o.Member < 0 {
		return fmt.Errorf("alloc: no member %d", o.Member)
	}
	l := optim.VecLayout{Member: int(o.Member), Shape: o.Shape, Block: o.Block}
	v, err := e.alloc(o.ID, e.layout.Of(l))
	if err != nil {
		return fmt.Errorf("alloc: %w", err)
	}
	v.layout = l
	e.vecs[o.ID] = v
	return nil
}

// free runs a Free: it releases the vector of handle o.ID.
func (e *Engine) free(o optim.Free) error {
	v, ok := e.vecs[o.ID]
	if !ok {
		return fmt.Errorf("free: handle %d is not allocated", o.ID)
	}
	e.release(v)
	delete(e.vecs, o.ID)
	return nil
}

// withOperand runs an op that writes vector dst in place with operand n
// (Fill, Scale, AddConst): an immediate through the scalar kernel imm, a
// register through the tensor-coefficient kernel reg (see coef).
func (e *Engine) withOperand(s *tensor.Scope, x *execState, dst optim.Vec, n optim.Num,
	imm func(d tensor.T, v float64), reg func(d, c tensor.T)) error {
	d, _, err := e.get(dst)
	if err != nil {
		return err
	}
	if v, ok := opset.Imm(n); ok {
		imm(d, v)
	} else {
		reg(d, e.coef(s, x, n, d))
	}
	return nil
}

// fillRange runs a FillRange: Dst[Offset:Offset+Len] = Value, within the
// vector.
func (e *Engine) fillRange(s *tensor.Scope, o optim.FillRange) error {
	d, _, err := e.get(o.Dst)
	if err != nil {
		return err
	}
	if n := d.Numel(); o.Offset < 0 || o.Len < 0 || o.Offset > n-o.Len {
		return fmt.Errorf("fill range: [%d, %d+%d) is outside a vector of %d", o.Offset, o.Offset, o.Len, n)
	}
	if o.Len > 0 {
		s.Fill(s.Narrow(d, 0, o.Offset, o.Len), o.Value)
	}
	return nil
}

// axpy runs an Axpy: Dst += Alpha·X.
func (e *Engine) axpy(s *tensor.Scope, x *execState, o optim.Axpy) error {
	d, v, err := e.same(s, o.Dst, o.X)
	if err != nil {
		return err
	}
	if a, ok := opset.Imm(o.Alpha); ok {
		s.Axpy(d, a, v)
	} else {
		s.AxpyT(d, e.coef(s, x, o.Alpha, d), v)
	}
	return nil
}

// randN runs a RandN: independent N(0, Std²) draws into Dst, from Seed,
// or from the engine's host stream when Seed is 0.
func (e *Engine) randN(s *tensor.Scope, o optim.RandN) error {
	d, _, err := e.get(o.Dst)
	if err != nil {
		return err
	}
	seed := o.Seed
	if seed == 0 {
		seed = e.rng.Int64()
	}
	tensor.ManualSeed(seed)
	if d.Device() != e.cfg.Device {
		// A spilled vector draws the device's numbers, as it would
		// on the device (CPU and CUDA generators differ).
		tmp := s.Zeros(d.Shape(), tensor.Float32, e.cfg.Device)
		s.NormalInPlace(tmp, 0, o.Std)
		s.CopyFrom(d, tmp)
		return nil
	}
	s.NormalInPlace(d, 0, o.Std)
	return nil
}

// dot runs a Dot and returns its register. As optim.Dot documents:
// float64, cast chunk by chunk (no float64 copy of a whole vector; bitwise
// the previous release's float64 dot up to 2²² elements).
func (e *Engine) dot(s *tensor.Scope, o optim.Dot) ([]register, error) {
	a, b, err := e.same(s, o.A, o.B)
	if err != nil {
		return nil, err
	}
	return []register{{t: e.toDevice(s, s.Dot(a, b))}}, nil
}

// norm runs a Norm and returns its register.
func (e *Engine) norm(s *tensor.Scope, o optim.Norm) ([]register, error) {
	v, _, err := e.get(o.X)
	if err != nil {
		return nil, err
	}
	return []register{{t: e.toDevice(s, s.Norm(v))}}, nil
}

// gradRegs runs op, a Grad or a JointGrad, and returns its outputs as
// float64 registers.
func (e *Engine) gradRegs(s *tensor.Scope, op optim.Op) ([]register, error) {
	var out []tensor.T
	var err error
	if g, ok := op.(optim.Grad); ok {
		out, err = e.grad(s, g)
	} else {
		out, err = e.jointGrad(s, op.(optim.JointGrad))
	}
	if err != nil {
		return nil, err
	}
	regs := make([]register, len(out))
	for i, t := range out {
		regs[i] = register{t: s.Cast(t, tensor.Float64)}
	}
	return regs, nil
}

// setLR runs a SetLR: it sets the learning rate that member o.Member's
// BaseStep uses for the rest of the step.
func (e *Engine) setLR(o optim.SetLR) error {
	if e.cfg.OwnsUpdate {
		return errOwnsUpdate("set_lr")
	}
	if int(o.Member) >= len(e.members) || o.Member < 0 {
		return fmt.Errorf("set_lr: no member %d", o.Member)
	}
	if math.IsNaN(o.LR) || o.LR < 0 {
		return fmt.Errorf("set_lr: invalid learning rate %v", o.LR)
	}
	e.members[o.Member].lr = o.LR
	return nil
}

// copyVec runs a Copy: the parameters, then the BatchNorm statistics as
// optim.Copy documents (checked before anything is written).
func (e *Engine) copyVec(s *tensor.Scope, o optim.Copy) error {
	d, src, err := e.same(s, o.Dst, o.Src)
	if err != nil {
		return err
	}
	dv := e.vecs[o.Dst] // nil for live parameters and ρ
	if !o.BN {
		s.CopyFrom(d, src)
		if dv != nil {
			dv.bn.Drop()
			dv.bnBatches = 0
		}
		return nil
	}
	stats, err := e.stats(o.Src)
	if err != nil {
		return fmt.Errorf("copy with BN statistics: %w", err)
	}
	var dst tensor.T
	if m, ok := o.Dst.Member(); ok {
		dst = e.members[m].Buf
	} else if dv != nil {
		dst = dv.bn
	} else {
		return fmt.Errorf("copy with BN statistics: handle %d is a ρ vector, which holds none", o.Dst)
	}
	if _, m, _ := e.get(o.Dst); e.members[m].Buf.Numel() != stats.Numel() {
		return fmt.Errorf("copy with BN statistics: member %d has %d, the source %d", m, e.members[m].Buf.Numel(), stats.Numel())
	}
	s.CopyFrom(d, src)
	if !dst.Valid() {
		dst = s.Keep(s.Zeros(stats.Shape(), tensor.Float32, dv.t.Device()))
		dv.bn = dst
	}
	s.CopyFrom(dst, stats)
	*e.bnBatches(o.Dst) = *e.bnBatches(o.Src)
	return s.Err()
}

// stats returns the BatchNorm running statistics that handle h carries: a
// member's live ones for its live parameters, a vector's own when a Copy
// with BN gave it some.
func (e *Engine) stats(h optim.Vec) (tensor.T, error) {
	if m, ok := h.Member(); ok && m < len(e.members) {
		return e.members[m].Buf, nil
	}
	v, ok := e.vecs[h]
	if !ok {
		return tensor.T{}, fmt.Errorf("handle %d holds no statistics", h)
	}
	if !v.bn.Valid() {
		return tensor.T{}, fmt.Errorf("vector %d holds no statistics (no Copy with BN filled it)", h)
	}
	return v.bn, nil
}

// evalStats returns the statistics a forward pass at handle h (of member
// m) uses: those h carries, else the member's live ones.
func (e *Engine) evalStats(h optim.Vec, m int) tensor.T {
	if t, err := e.stats(h); err == nil {
		return t
	}
	return e.members[m].Buf
}

// lincomb sets Dst = Σ Coef_i·X_i, accumulating in Dst with one temporary
// per term at a time (each term's product is freed before the next), or,
// when Dst is among the terms after the first, in one temporary copied to
// Dst at the end. Immediates use the scalar kernels (the bits of the
// previous release: the first term's product, then each product added in
// order); registers the tensor-coefficient ones.
func (e *Engine) lincomb(s *tensor.Scope, x *execState, o optim.LinComb) error {
	d, _, err := e.get(o.Dst)
	if err != nil {
		return err
	}
	if len(o.Terms) == 0 {
		s.Fill(d, 0)
		return nil
	}
	vecs := make([]tensor.T, len(o.Terms))
	for i, t := range o.Terms {
		if _, vecs[i], err = e.same(s, o.Dst, t.X); err != nil {
			return err
		}
	}
	alias := false
	for _, t := range o.Terms[1:] {
		alias = alias || t.X == o.Dst
	}
	c0 := o.Terms[0].Coef
	acc := d
	switch {
	case alias:
		// Dst is read by a later term: accumulate in a temporary.
		if v, ok := opset.Imm(c0); ok {
			acc = s.Scale(vecs[0], v)
		} else {
			acc = s.Mul(vecs[0], e.coef(s, x, c0, d))
		}
	default:
		if o.Terms[0].X != o.Dst {
			s.CopyFrom(d, vecs[0])
		}
		if v, ok := opset.Imm(c0); ok {
			s.ScaleInPlace(d, v)
		} else {
			s.ScaleT(d, e.coef(s, x, c0, d))
		}
	}
	for i, t := range o.Terms[1:] {
		ts := tensor.NewScope()
		if v, ok := opset.Imm(t.Coef); ok {
			ts.AddInPlace(acc, ts.Scale(vecs[i+1], v))
		} else {
			ts.AxpyT(acc, e.coef(ts, x, t.Coef, d), vecs[i+1])
		}
		err := ts.Err()
		ts.Close()
		if err != nil {
			return err
		}
	}
	if alias {
		s.CopyFrom(d, acc)
	}
	return nil
}

func (e *Engine) unary(s *tensor.Scope, o optim.Unary) error {
	d, v, err := e.same(s, o.Dst, o.Src)
	if err != nil {
		return err
	}
	switch o.Kind {
	case optim.Abs:
		s.AbsInto(d, v)
	case optim.Sign:
		s.SignInto(d, v)
	case optim.Sqrt:
		s.SqrtInto(d, v)
	case optim.Square:
		s.SquareInto(d, v)
	case optim.Softplus:
		s.SoftplusInto(d, v)
	case optim.Exp:
		s.ExpInto(d, v)
	case optim.Log:
		s.LogInto(d, v)
	case optim.Reciprocal:
		s.ReciprocalInto(d, v)
	default:
		return fmt.Errorf("unknown unary kind %d: %w", o.Kind, errors.ErrUnsupported)
	}
	return nil
}

func (e *Engine) binary(s *tensor.Scope, o optim.Binary) error {
	d, a, err := e.same(s, o.Dst, o.A)
	if err != nil {
		return err
	}
	_, b, err := e.same(s, o.Dst, o.B)
	if err != nil {
		return err
	}
	switch o.Kind {
	case optim.Mul:
		s.MulInto(d, a, b)
	case optim.Div:
		s.DivInto(d, a, b)
	case optim.Add:
		s.AddInto(d, a, b)
	case optim.Sub:
		s.SubInto(d, a, b)
	case optim.Max:
		s.MaximumInto(d, a, b)
	case optim.Min:
		s.MinimumInto(d, a, b)
	default:
		return fmt.Errorf("unknown binary kind %d: %w", o.Kind, errors.ErrUnsupported)
	}
	return nil
}

// selectBatch returns the samples of the current batch that b selects.
func (e *Engine) selectBatch(s *tensor.Scope, mem *Member, b optim.Batch) (tensor.T, tensor.T, error) {
	if b.Of < 0 || b.Part < 0 || b.Part >= max(b.Of, 1) {
		return tensor.T{}, tensor.T{}, fmt.Errorf("grad: batch part %d of %d", b.Part, b.Of)
	}
	if !mem.x.Valid() {
		return tensor.T{}, tensor.T{}, errors.New("grad: no current batch")
	}
	if b.Of <= 1 {
		return mem.x, mem.y, nil
	}
	n := mem.y.Shape()[0]
	size := n / int64(b.Of)
	if b.Part < 0 || b.Part >= b.Of || size == 0 {
		return tensor.T{}, tensor.T{}, fmt.Errorf("grad: part %d of %d of a batch of %d", b.Part, b.Of, n)
	}
	if b.Shuffle == 0 {
		return s.Narrow(mem.x, 0, int64(b.Part)*size, size), s.Narrow(mem.y, 0, int64(b.Part)*size, size), nil
	}
	k := permKey{b.Shuffle, n}
	perm, ok := e.perms[k]
	if !ok {
		perm = s.Keep(s.SplitMixPermutation(n, b.Shuffle, e.cfg.Device))
		if err := s.Err(); err != nil {
			return tensor.T{}, tensor.T{}, err
		}
		e.perms[k] = perm
	}
	idx := s.Narrow(perm, 0, int64(b.Part)*size, size)
	return s.IndexSelect(mem.x, 0, idx), s.IndexSelect(mem.y, 0, idx), nil
}

// permKey names a sub-batch permutation: its Shuffle seed and length.
type permKey struct{ seed, n int64 }

// dropPerms frees the step's sub-batch permutations. Call on the worker.
func (e *Engine) dropPerms() {
	for k, p := range e.perms {
		p.Drop()
		delete(e.perms, k)
	}
}

// Permutation is the seeded permutation of 0..n−1 that a sub-batch split
// with Shuffle = seed uses, computed on the host: the order of the first n
// outputs of SplitMix64 seeded with seed (tensor.SplitMixPermutation). The
// engine computes the same permutation on the device from the seed alone,
// so a shuffled split copies nothing from the host; it is the same on every
// device.
func Permutation(n, seed int64) []int64 { return tensor.SplitMixPermutation(n, seed) }

// bnMomentum returns the BatchNorm momentum of a pass in mode bn.
func (e *Engine) bnMomentum(bn optim.BNMode) (float64, error) {
	switch bn {
	case optim.BNUpdate:
		return e.cfg.BNMomentum, nil
	case optim.BNFreeze:
		return 0, nil
	}
	return 0, fmt.Errorf("unknown BN mode %d: %w", bn, errors.ErrUnsupported)
}

// grad runs forward and backward at the vector o.At on the selected batch.
func (e *Engine) grad(s *tensor.Scope, o optim.Grad) ([]tensor.T, error) {
	if _, ok := o.At.Rho(); ok {
		return nil, fmt.Errorf("grad at ρ handle %d: At must hold parameters (a variational member's means μ)", o.At)
	}
	at, m, err := e.get(o.At)
	if err != nil {
		return nil, err
	}
	mem := e.members[m]
	x, y, err := e.selectBatch(s, mem, o.Batch)
	if err != nil {
		return nil, err
	}
	mom, err := e.bnMomentum(o.BN)
	if err != nil {
		return nil, err
	}
	at = e.toDevice(s, at)
	if o.OutLosses != 0 || o.Rank != 0 {
		return e.sampleGrad(s, o, mem, at, x, y, mom)
	}
	if sh := x.Shape(); len(sh) > 0 {
		e.count.gradSamples.Add(sh[0])
	}
	if mem.vi != nil {
		if e.cfg.MicroBatches > 1 {
			return nil, fmt.Errorf("grad: train.micro_batches = %d: a variational member's pass is not cut into micro-batches", e.cfg.MicroBatches)
		}
		if o.BN == optim.BNUpdate {
			mem.bnBatches++
		}
		return e.varGrad(s, o, mem, at, x, y, mom)
	}
	if k := e.cfg.MicroBatches; k > 1 && x.Shape()[0] > 1 {
		return e.microGrad(s, o, mem, at, x, y, mom)
	}
	if o.BN == optim.BNUpdate {
		mem.bnBatches++
	}
	if o.Eps != 0 || o.OutRho != 0 {
		return nil, fmt.Errorf("grad: eps/out_rho given for member %d, which is not variational", m)
	}
	leaf := s.RequiresGrad(at)
	logits := mem.Model.Forward(s, leaf, mem.Buf, x, true, mom)
	loss := s.CrossEntropy(logits, y, e.cfg.LabelSmoothing)
	var out []tensor.T
	if o.Out != 0 {
		d, _, err := e.get(o.Out)
		if err != nil {
			return nil, err
		}
		s.CopyFrom(d, s.Gradient(loss, leaf))
	}
	acc := s.Mean(s.Cast(s.Eq(s.Argmax(logits, 1), y), tensor.Float32))
	out = append(out, s.Detach(loss), acc)
	return out, nil
}

// sampleGrad is grad with per-sample losses (OutLosses) or on the Keep
// samples of largest Rank (protocol minor 10): the selection is a fixed
// number of indices computed on the device, the sub-batch is gathered and
// passed alone (its own BatchNorm batch statistics), and a pass with no Out
// is forward only (no autograd graph; counted in ForwardSamples, not
// GradSamples).
func (e *Engine) sampleGrad(s *tensor.Scope, o optim.Grad, mem *Member, at, x, y tensor.T, mom float64) ([]tensor.T, error) {
	if mem.vi != nil {
		return nil, errors.New("grad: per-sample losses and a ranked sub-batch are for deterministic members")
	}
	if e.cfg.MicroBatches > 1 {
		return nil, fmt.Errorf("grad: train.micro_batches = %d: a pass with per-sample losses or a ranked sub-batch is not cut into micro-batches", e.cfg.MicroBatches)
	}
	n := y.Shape()[0]
	var idx tensor.T
	for _, v := range []optim.Vec{o.OutLosses, o.Rank} {
		if v == 0 {
			continue
		}
		t, _, err := e.get(v)
		if err != nil {
			return nil, err
		}
		if t.Numel() != n {
			return nil, fmt.Errorf("grad: a batch of %d samples; sample vectors hold %d", n, t.Numel())
		}
		if v == o.Rank {
			idx = s.TopIndices(e.toDevice(s, t), o.Keep)
			x, y = s.IndexSelect(x, 0, idx), s.IndexSelect(y, 0, idx)
		}
	}
	k := y.Shape()[0]
	forward := o.Out == 0 && o.OutLosses != 0
	if forward {
		e.count.forwardSamples.Add(k)
	} else {
		e.count.gradSamples.Add(k)
	}
	if o.BN == optim.BNUpdate {
		mem.bnBatches++
	}
	leaf := at
	if !forward {
		leaf = s.RequiresGrad(at)
	}
	logits := mem.Model.Forward(s, leaf, mem.Buf, x, true, mom)
	var loss tensor.T
	if o.OutLosses != 0 {
		each := s.CrossEntropyEach(logits, y, e.cfg.LabelSmoothing)
		loss = s.Mean(each)
		full := s.Detach(each)
		if idx.Valid() {
			full = s.Zeros([]int64{n}, tensor.Float32, at.Device())
			s.IndexCopyInto(full, idx, s.Detach(each))
		}
		d, _, _ := e.get(o.OutLosses)
		s.CopyFrom(d, full)
	} else {
		loss = s.CrossEntropy(logits, y, e.cfg.LabelSmoothing)
	}
	if o.Out != 0 {
		d, _, err := e.get(o.Out)
		if err != nil {
			return nil, err
		}
		s.CopyFrom(d, s.Gradient(loss, leaf))
	}
	acc := s.Mean(s.Cast(s.Eq(s.Argmax(logits, 1), y), tensor.Float32))
	return []tensor.T{s.Detach(loss), acc}, nil
}

// microGrad is grad over micro-batches (Config.MicroBatches): the batch
// x, y cut into k contiguous parts (the first n mod k one sample larger),
// each forward and backward in a scope of its own, so that one part's
// activations live at a time; the gradient, loss and accuracy are the
// parts' weighted by their sizes (the batch's means).
func (e *Engine) microGrad(s *tensor.Scope, o optim.Grad, mem *Member, at, x, y tensor.T, mom float64) ([]tensor.T, error) {
	n := x.Shape()[0]
	k := min(int64(e.cfg.MicroBatches), n)
	var g, loss, acc tensor.T
	if o.Out != 0 {
		g = s.Zeros(at.Shape(), tensor.Float32, at.Device())
	}
	loss = s.ScalarTensor(0, at.Device())
	acc = s.ScalarTensor(0, at.Device())
	var start int64
	for j := range k {
		size := n / k
		if j < n%k {
			size++
		}
		w := float64(size) / float64(n)
		ms := tensor.NewScope()
		xj, yj := ms.Narrow(x, 0, start, size), ms.Narrow(y, 0, start, size)
		leaf := ms.RequiresGrad(at)
		logits := mem.Model.Forward(ms, leaf, mem.Buf, xj, true, mom)
		lj := ms.CrossEntropy(logits, yj, e.cfg.LabelSmoothing)
		if g.Valid() {
			ms.Axpy(g, w, ms.Gradient(lj, leaf))
		}
		aj := ms.Mean(ms.Cast(ms.Eq(ms.Argmax(logits, 1), yj), tensor.Float32))
		ms.AddInPlace(loss, ms.Scale(ms.Cast(ms.Detach(lj), tensor.Float64), w))
		ms.AddInPlace(acc, ms.Scale(ms.Cast(aj, tensor.Float64), w))
		err := ms.Err()
		ms.Close()
		if err != nil {
			return nil, fmt.Errorf("grad: micro-batch %d of %d: %w", j+1, k, err)
		}
		if o.BN == optim.BNUpdate {
			mem.bnBatches++
		}
		start += size
	}
	if g.Valid() {
		d, _, err := e.get(o.Out)
		if err != nil {
			return nil, err
		}
		s.CopyFrom(d, g)
	}
	return []tensor.T{s.Cast(loss, tensor.Float32), s.Cast(acc, tensor.Float32)}, nil
}

// alloc makes plugin vector id: a zero vector of layout l's Numel floats
// on the device. When it does not fit (the device budget is used up, or the
// device is out of memory), it fails, or, with Config.Spill, keeps the
// vector in host memory and logs it.
func (e *Engine) alloc(id optim.Vec, l optim.MemberLayout) (*vec, error) {
	n := l.Numel
	bytes := 4 * n
	what := fmt.Sprintf("vector %d (%d parameters, %s)", id, n, mib(bytes))
	factor := len(l.Tensors) > 0 && l.Tensors[0].Kind == "factor"
	if factor {
		big := l.Tensors[0]
		for _, t := range l.Tensors {
			if t.Numel() > big.Numel() {
				big = t
			}
		}
		what = fmt.Sprintf("factor vector %d (%d matrices, the largest %s of %d×%d; %s in all)", id, len(l.Tensors), big.Name, big.Shape[0], big.Shape[1], mib(bytes))
	}
	// On the CPU the device is the host's memory: the budget bounds it.
	onHost := !e.cfg.Device.IsCUDA()
	var why string
	if e.cfg.DeviceBudget <= 0 || e.vecMem+bytes <= e.cfg.DeviceBudget {
		var held int64
		if onHost {
			if err := e.budget.Hold(what, bytes); err != nil {
				return nil, err
			}
			held = bytes
		}
		s := tensor.NewScope()
		t := s.Zeros([]int64{n}, tensor.Float32, e.cfg.Device)
		err := s.Err()
		if err == nil {
			e.vecMem += bytes
			v := &vec{t: s.Keep(t), held: held}
			s.Close()
			return v, nil
		}
		s.Close()
		if onHost {
			e.budget.Release(held)
			return nil, err // the CPU is the host: nowhere else to go
		}
		why = fmt.Sprintf("%s is out of memory (%v)", e.cfg.Device, err)
	} else {
		why = fmt.Sprintf("the device budget for plugin vectors (%s) is used up (%s in %d vectors on %s)",
			mib(e.cfg.DeviceBudget), mib(e.vecMem), len(e.vecs)-e.spilled, e.cfg.Device)
	}
	if factor {
		why += "; a smaller block (Alloc's Block) makes the factors smaller"
	}
	if !e.cfg.Spill {
		return nil, fmt.Errorf("%s does not fit: %s; set train.spill = true to keep such vectors in host memory (ops on them are then slower), or use fewer vectors or a smaller model", what, why)
	}
	if err := e.budget.Hold(what+" spilled to host memory", bytes); err != nil {
		return nil, fmt.Errorf("%s does not fit: %s, and host memory has no room either: %w", what, why, err)
	}
	s := tensor.NewScope()
	defer s.Close()
	t := s.Zeros([]int64{n}, tensor.Float32, e.spillDevice())
	if err := s.Err(); err != nil {
		e.budget.Release(bytes)
		return nil, fmt.Errorf("%s: %s, and host memory has no room either: %w", what, why, err)
	}
	e.spilled++
	e.logf("engine: %s spilled to host memory (train.spill): %s; ops on it move data between host and %s", what, why, e.cfg.Device)
	return &vec{t: s.Keep(t), host: true, held: bytes}, nil
}

// spillDevice is where spilled vectors live.
func (e *Engine) spillDevice() tensor.Device {
	if e.cfg.spillTo == (tensor.Device{}) {
		return tensor.CPU
	}
	return e.cfg.spillTo
}

// logf sends a notice to Config.Log.
func (e *Engine) logf(format string, args ...any) {
	if e.cfg.Log != nil {
		e.cfg.Log(fmt.Sprintf(format, args...))
	}
}

// mib renders a byte count in MiB.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// release frees a plugin vector.
func (e *Engine) release(v *vec) {
	if v.host {
		e.spilled--
	} else {
		e.vecMem -= 4 * v.t.Numel()
	}
	if v.held > 0 {
		e.budget.Release(v.held)
	}
	v.t.Drop()
	v.bn.Drop()
}

// Spilled returns the number of plugin vectors kept in host memory.
func (e *Engine) Spilled() int { return e.spilled }

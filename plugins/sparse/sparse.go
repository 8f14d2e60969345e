// Package sparse is the two sparse-training ensembles of Liu et al., "Deep
// Ensembling with No Overhead for either Training or Testing: The
// All-Round Blessings of Dynamic Sparsity" (ICLR 2022; FreeTickets,
// VITA-Group/FreeTickets), the DST and EDST rows of the OT-MDR paper's
// Table 3, as two built-in plugins:
//
//   - "dst" (NewDST): the DST ensemble. The run's M members train
//     independently (own initialization, own data order:
//     optim.Features.MemberDataOrder), each with dynamic sparse training at
//     overall density d: an ERK sparse initialization, every step a
//     gradient at the masked parameters, the base optimizer's step and the
//     mask applied again, and every ΔT steps a topology update that prunes
//     the ⌈p·active⌉ smallest-magnitude active weights of each layer and
//     regrows as many inactive ones by gradient magnitude, with p decaying
//     (cosine) over the run. The predictive averages the members'
//     probabilities.
//   - "edst" (NewEDST): the EDST ensemble. One network (member 0) trains
//     with the same dynamic sparse training through an exploration phase
//     and then M refinement phases, with FreeTickets' learning rates set
//     by SetLR; at the end of refinement phase k < M−1 the model is ticket
//     k, copied (with its BatchNorm statistics) into member k+1's live
//     parameters, and a large exploration step (death rate q) moves the
//     network to the next ticket. The run's M members are the M tickets
//     (the last is member 0 itself), so an EDST run has the same member
//     spec as the deep ensemble it is compared with; the predictive
//     averages the tickets taken so far.
//
// Masks are plugin vectors (dst/mask[m], edst/mask[0]), checkpointed by
// SaveState; the members' live parameters are dense vectors with zeros
// where masked, which the host evaluates as they are. docs/METHODS.md ("DST
// and EDST") gives the algorithm, the hyperparameters and every departure
// from the published code. The golden op traces in testdata are the
// op-level description: trace_dst.golden and trace_edst.golden.
package sparse

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Kinds of sparse ensemble: the two plugins' names.
const (
	DST  = "dst"
	EDST = "edst"
)

// Config holds the hyperparameters of dynamic sparse training that DST and
// EDST share.
type Config struct {
	Density         float64 `hp:"density" range:"(0,1]" doc:"overall density d of the sparse layers (1 − sparsity; FreeTickets: 0.2)"`
	DeathRate       float64 `hp:"death_rate" range:"[0,1]" doc:"p: fraction of each layer's active weights pruned and regrown at every topology update (FreeTickets --death-rate 0.5)"`
	UpdateFrequency int     `hp:"update_frequency" range:"[1,)" doc:"ΔT: a topology update after every ΔT-th step of the run (FreeTickets --update-frequency 1000)"`
	Decay           string  `hp:"decay" enum:"cosine|constant" doc:"p over the run: \"cosine\" from p to 0.005 over the run's steps (CosineDecay), or \"constant\" (what the released code's updates use)"`
	ERKPowerScale   float64 `hp:"erk_power_scale" range:"[0,)" doc:"exponent of ERK's per-layer ratio (Σ shape/Π shape); 0: the same density in every sparse layer"`
}

// EDSTConfig holds EDST's hyperparameters: dynamic sparse training's and
// the phases'.
type EDSTConfig struct {
	Config
	ExploreEpochs  int     `hp:"explore_epochs" range:"[-1,)" doc:"epochs of the exploration phase (FreeTickets --epochs-explo 150 of 450); -1: a third of the run's epochs, rounded down"`
	LargeDeathRate float64 `hp:"large_death_rate" range:"[0,1]" doc:"q: death rate of the large exploration step between two tickets (FreeTickets --large-death-rate 0.8)"`
	ExploreLR      float64 `hp:"explore_lr" range:"[0,)" doc:"learning rate of the exploration phase (FreeTickets: --lr 0.1, no schedule); 0: the experiment's schedule (StepInput.LR)"`
	RefineLR       float64 `hp:"refine_lr" range:"(0,)" doc:"learning rate of the first half of every refinement phase (FreeTickets: 0.01)"`
	RefineLRFinal  float64 `hp:"refine_lr_final" range:"(0,)" doc:"learning rate of the second half of every refinement phase (FreeTickets: 0.001)"`
}

// DefaultConfig returns DST's default hyperparameters: FreeTickets' CIFAR
// settings, the death rate decaying as the paper describes.
func DefaultConfig() Config {
	return Config{Density: 0.2, DeathRate: 0.5, UpdateFrequency: 1000, Decay: Cosine, ERKPowerScale: 1}
}

// DefaultEDSTConfig returns EDST's default hyperparameters: FreeTickets'
// README command (a constant death rate, --decay-schedule constant).
func DefaultEDSTConfig() EDSTConfig {
	c := DefaultConfig()
	c.Decay = Constant
	return EDSTConfig{Config: c, ExploreEpochs: -1, LargeDeathRate: 0.8, ExploreLR: 0.1, RefineLR: 0.01, RefineLRFinal: 0.001}
}

// Sparse is the optimizer of both kinds. Create it with NewDST or NewEDST.
type Sparse struct {
	optim.Defaults
	h    optim.Host
	kind string
	ed   EDSTConfig // the hyperparameters (DST uses ed.Config only)
	// resolved are the EDST values derived in Configure (explore_epochs).
	resolved map[string]any
	hs       *optim.Handles
	// scratch and grow name the vectors a topology update allocates and
	// frees.
	scratch, grow optim.Vec
	// nets are the sparse networks: every member's for DST, member 0's for
	// EDST.
	nets    []net
	members int
	total   int64
	spe     int64
	// plan is EDST's schedule and taken the number of tickets copied into
	// members 1, 2, … so far.
	plan  EDSTPlan
	taken int
	// ticketMasks are EDST's copies of member 0's mask when each ticket
	// k < M−1 was taken (member k+1's layout): the mask the ticket keeps.
	ticketMasks []optim.Vec
}

var _ optim.Optimizer = (*Sparse)(nil)

// NewDST returns the DST ensemble optimizer with the default
// hyperparameters.
func NewDST() optim.Optimizer { return &Sparse{kind: DST, ed: EDSTConfig{Config: DefaultConfig()}} }

// NewEDST returns the EDST ensemble optimizer with the default
// hyperparameters.
func NewEDST() optim.Optimizer { return &Sparse{kind: EDST, ed: DefaultEDSTConfig()} }

// Info implements optim.Optimizer.
func (o *Sparse) Info() optim.Info {
	info := optim.Info{Name: o.kind, Version: "0.1.0", Features: optim.Features{Members: true, Predictive: true, State: true}}
	if o.kind == DST {
		info.Features.MemberDataOrder = true
		info.Params = hparams.MustSpecs(DefaultConfig())
		return info
	}
	info.Params = hparams.MustSpecs(DefaultEDSTConfig())
	return info
}

// Mask returns the handle of member m's mask (for EDST, m = 0 only), valid
// after Configure: 1 on the active weights of its sparse layers and on
// every other parameter, 0 elsewhere.
func (o *Sparse) Mask(m int) optim.Vec { return o.nets[m].mask }

// Layers returns member m's sparse layers (for EDST, m = 0 only), valid
// after Configure. Weight tensors that ERK leaves dense are not listed.
func (o *Sparse) Layers(m int) []Layer { return slices.Clone(o.nets[m].layers) }

// Tickets returns the handles of the EDST tickets taken so far, in order:
// members 1, 2, … and, last, member 0's live parameters (the ticket in
// training, the last one once the run ends). For DST it is every member's
// live parameters.
func (o *Sparse) Tickets() []optim.Vec {
	if o.kind == DST {
		vecs := make([]optim.Vec, o.members)
		for m := range vecs {
			vecs[m] = optim.ParamsOf(m)
		}
		return vecs
	}
	vecs := make([]optim.Vec, 0, o.taken+1)
	for k := range o.taken {
		vecs = append(vecs, optim.ParamsOf(k+1))
	}
	return append(vecs, optim.Params)
}

// Configure implements optim.Optimizer: it plans every member's sparse
// layers from the layout, allocates the masks and gradient buffers, draws
// the initial masks and masks the live parameters (on a resumed run the
// host then restores the checkpointed parameters and masks over them).
func (o *Sparse) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	given, err := o.parse(cfg.Params)
	if err != nil {
		return err
	}
	*o = Sparse{h: h, kind: o.kind, ed: given, hs: cfg.Namespace(o.kind), members: cfg.MemberCount(),
		total: cfg.TotalSteps, spe: cfg.StepsPerEpoch}
	if o.total < 1 {
		return fmt.Errorf("%s: needs the run's total steps, got %d", o.kind, o.total)
	}
	l, err := h.Layout(ctx)
	if err != nil {
		return fmt.Errorf("%s: layout: %w", o.kind, err)
	}
	if len(l.Members) < o.members {
		return fmt.Errorf("%s: the layout has %d members, the run %d", o.kind, len(l.Members), o.members)
	}
	trained := o.members
	if o.kind == EDST {
		if err := o.planEDST(l); err != nil {
			return err
		}
		trained = 1
	}
	o.scratch, o.grow = o.hs.New("scratch"), o.hs.New("grow")
	masks, gs := o.hs.PerMember("mask", trained), o.hs.PerMember("g", trained)
	p := o.hs.Prog()
	for m := range trained {
		if l.Members[m].Variational {
			return fmt.Errorf("%s: member %d is variational; sparse training needs deterministic members", o.kind, m)
		}
		layers, err := layerPlan(l.Members[m], o.ed.Density, o.ed.ERKPowerScale)
		if err != nil {
			return fmt.Errorf("%s: member %d: %w", o.kind, m, err)
		}
		n := net{member: m, mask: masks[m], g: gs[m], layers: layers}
		n.initMask(p, o.scratch, maskSeed(cfg.Seed, m))
		o.nets = append(o.nets, n)
	}
	if o.kind == EDST {
		o.ticketMasks = o.hs.PerMember("ticket_mask", o.members-1)
		for k, v := range o.ticketMasks {
			p.Alloc(v, k+1)
		}
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("%s: sparse initialization: %w", o.kind, err)
	}
	return nil
}

// parse applies params (as Config.Params carries them) to the kind's
// defaults and validates them; DST's are Config's alone.
func (o *Sparse) parse(params map[string]any) (EDSTConfig, error) {
	c := DefaultEDSTConfig()
	var dst any = &c
	if o.kind == DST {
		c = EDSTConfig{Config: DefaultConfig()}
		dst = &c.Config
	}
	if err := hparams.Apply(dst, params); err != nil {
		return EDSTConfig{}, fmt.Errorf("%s: %w", o.kind, err)
	}
	return c, nil
}

// planEDST checks an EDST run's members and works out its plan.
func (o *Sparse) planEDST(l optim.Layout) error {
	if o.spe < 1 {
		return fmt.Errorf("edst: needs the steps per epoch, got %d", o.spe)
	}
	for m := 1; m < o.members; m++ {
		if !sameLayout(l.Members[m], l.Members[0]) {
			return fmt.Errorf("edst: member %d (%s) has another layout than member 0 (%s): the members hold "+
				"tickets of one network, so they must be one arch (archs = [\"resnet10*5\"])", m, l.Members[m].Arch, l.Members[0].Arch)
		}
	}
	epochs := int((o.total + o.spe - 1) / o.spe)
	if o.ed.ExploreEpochs < 0 {
		o.ed.ExploreEpochs = epochs / 3
		o.resolved = map[string]any{"explore_epochs": int64(o.ed.ExploreEpochs)}
	}
	if o.ed.ExploreEpochs >= epochs {
		// As SWA refuses a run with nothing to average: the predictive
		// would be the explored model alone, recorded as an EDST ensemble.
		return fmt.Errorf("edst: explore_epochs = %d, but the run has %d epochs: no ticket would be refined, nothing ensembled (lower explore_epochs or train more epochs)",
			o.ed.ExploreEpochs, epochs)
	}
	o.plan = NewEDSTPlan(epochs, o.ed.ExploreEpochs, o.members)
	return nil
}

// sameLayout reports whether a and b are the same network's layout.
func sameLayout(a, b optim.MemberLayout) bool {
	return a.Numel == b.Numel && a.Variational == b.Variational &&
		slices.EqualFunc(a.Tensors, b.Tensors, func(x, y optim.Tensor) bool {
			return x.Offset == y.Offset && x.Kind == y.Kind && slices.Equal(x.Shape, y.Shape)
		})
}

// maskSeed returns the seed (≠ 0: a draw independent of the host's
// stream) of member m's initial mask in a run with seed seed.
func maskSeed(seed int64, m int) int64 {
	r := rand.New(rand.NewPCG(uint64(seed), 0x7370617273650000^uint64(m)))
	for {
		if s := r.Int64(); s != 0 {
			return s
		}
	}
}

// Step implements optim.Optimizer with one Exec and no blocking read: every
// net's sparse step, the topology updates due after it, and for EDST the
// step's rate (SetLR, first) and, at the end of a refinement phase, the
// ticket and the large exploration step. The mean loss and accuracy of the
// gradient passes are reported from the device.
func (o *Sparse) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	if o.nets == nil {
		return optim.StepOutput{}, fmt.Errorf("%s: step before configure", o.kind)
	}
	if in.Step < 0 || in.Step >= o.total {
		return optim.StepOutput{}, fmt.Errorf("%s: step %d outside the run's %d steps", o.kind, in.Step, o.total)
	}
	p := o.hs.Prog()
	ticket := -1
	if o.kind == EDST {
		lr, t, err := o.schedule(in)
		if err != nil {
			return optim.StepOutput{}, err
		}
		p.SetLR(0, lr)
		ticket = t
	}
	evs := make([]optim.Eval, len(o.nets))
	for i, n := range o.nets {
		evs[i] = n.step(p)
	}
	if s := in.Step + 1; s%int64(o.ed.UpdateFrequency) == 0 {
		rate := DeathRate(o.ed.Decay, o.ed.DeathRate, s, o.total)
		for _, n := range o.nets {
			n.explore(p, o.scratch, o.grow, rate)
		}
	}
	if ticket >= 0 {
		p.CopyState(optim.ParamsOf(ticket+1), optim.Params)
		p.Copy(o.ticketMasks[ticket], o.nets[0].mask)
		o.nets[0].explore(p, o.scratch, o.grow, o.ed.LargeDeathRate)
	}
	p.ReportMetrics(p.Mean(evs))
	if _, err := o.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("%s: step %d: %w", o.kind, in.Step, err)
	}
	if ticket >= 0 {
		o.taken = ticket + 1
	}
	return optim.StepOutput{}, nil
}

// schedule returns an EDST step's learning rate and the ticket taken after
// it (-1 for none).
func (o *Sparse) schedule(in optim.StepInput) (float64, int, error) {
	epoch := in.Step / o.spe
	if int64(in.Epoch) != epoch {
		return 0, -1, fmt.Errorf("edst: step %d is not in epoch %d of %d steps", in.Step, in.Epoch, o.spe)
	}
	lr := o.ed.ExploreLR
	switch o.plan.Phases[epoch] {
	case Explore:
		if lr == 0 {
			lr = in.LR
		}
	case Refine:
		lr = o.ed.RefineLR
	case RefineFinal:
		lr = o.ed.RefineLRFinal
	}
	last := (in.Step+1)%o.spe == 0 || in.Step == o.total-1
	if !last {
		return lr, -1, nil
	}
	k := slices.Index(o.plan.Ends, int(epoch)+1)
	if k >= 0 && k != o.taken {
		return 0, -1, fmt.Errorf("edst: ticket %d due at step %d, but %d were taken", k, in.Step, o.taken)
	}
	return lr, k, nil
}

// Predictive implements optim.Optimizer (Features.Predictive): the average of the probabilities
// of every member (DST) or of the tickets taken so far and the network in
// training (EDST; all M once the run ends).
func (o *Sparse) Predictive(context.Context) (optim.Predictive, error) {
	if o.nets == nil {
		return optim.Predictive{}, fmt.Errorf("%s: predictive before configure", o.kind)
	}
	return optim.Predictive{Kind: optim.Members, Vecs: o.Tickets(), Masks: o.TicketMasks()}, nil
}

// TicketMasks returns the masks of Tickets' vectors, in the same order:
// every member's mask for DST; for EDST the mask each ticket was taken
// with and, last, member 0's current one. The host saves them beside the
// tickets in the run's model file.
func (o *Sparse) TicketMasks() []optim.Vec {
	if o.kind == DST {
		masks := make([]optim.Vec, len(o.nets))
		for m, n := range o.nets {
			masks[m] = n.mask
		}
		return masks
	}
	return append(slices.Clone(o.ticketMasks[:o.taken]), o.nets[0].mask)
}

// Resolved implements optim.Optimizer: EDST's explore_epochs when it was -1.
func (o *Sparse) Resolved() map[string]any { return o.resolved }

// state is the checkpointed blob. Active, the per-layer active counts,
// lets LoadState refuse a state saved with other densities.
type state struct {
	Version int       `json:"version"`
	Kind    string    `json:"kind"`
	Active  [][]int64 `json:"active"`
	Taken   int       `json:"taken"`
}

// active returns the nets' per-layer active counts.
func (o *Sparse) active() [][]int64 {
	out := make([][]int64, len(o.nets))
	for i, n := range o.nets {
		for _, l := range n.layers {
			out[i] = append(out[i], l.Active)
		}
	}
	return out
}

// SaveState implements optim.Optimizer (Features.State). The vectors are the masks (the
// gradient buffers are recomputed before every use; the tickets are
// members' live parameters, which the host saves); the blob holds the
// per-layer counts and EDST's tickets taken.
func (o *Sparse) SaveState(context.Context) ([]byte, []optim.Vec, error) {
	if o.nets == nil {
		return nil, nil, fmt.Errorf("%s: save state before configure", o.kind)
	}
	b, err := json.Marshal(state{Version: 1, Kind: o.kind, Active: o.active(), Taken: o.taken})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: save state: %w", o.kind, err)
	}
	vecs := make([]optim.Vec, 0, len(o.nets)+len(o.ticketMasks))
	for _, n := range o.nets {
		vecs = append(vecs, n.mask)
	}
	return b, append(vecs, o.ticketMasks...), nil
}

// LoadState implements optim.Optimizer (Features.State), after Configure: the host has
// restored the masks into the handles Configure allocated.
func (o *Sparse) LoadState(_ context.Context, blob []byte) error {
	if o.nets == nil {
		return fmt.Errorf("%s: load state before configure", o.kind)
	}
	var s state
	if err := json.Unmarshal(blob, &s); err != nil {
		return fmt.Errorf("%s: load state: %w", o.kind, err)
	}
	switch {
	case s.Version != 1:
		return fmt.Errorf("%s: load state: unsupported version %d", o.kind, s.Version)
	case s.Kind != o.kind:
		return fmt.Errorf("%s: load state: saved by %q", o.kind, s.Kind)
	case !slices.EqualFunc(s.Active, o.active(), slices.Equal):
		return fmt.Errorf("%s: load state: saved with per-layer active counts %v, configured %v "+
			"(another density, erk_power_scale or model)", o.kind, s.Active, o.active())
	case s.Taken < 0 || s.Taken > len(o.plan.Ends):
		return fmt.Errorf("%s: load state: %d tickets taken, the plan has %d before the last", o.kind, s.Taken, len(o.plan.Ends))
	}
	o.taken = s.Taken
	return nil
}

// Package optim holds the plain Go types an optimizer author writes against:
// the Host the optimizer drives, the Optimizer interface it implements, and
// the Program of ops it sends. Nothing parameter-sized ever crosses this
// interface: vectors stay on the host and are named by Vec handles.
package optim

import (
	"context"
)

// ProtocolMajor is the go-plugin protocol version; a change breaks plugins.
const ProtocolMajor = 1

// ProtocolMinor is the in-band minor version carried by Info; hosts accept
// plugins with a minor version up to their own.
const ProtocolMinor = 12

// Host is what an optimizer drives: it describes the parameter layout and
// executes programs of ops on the device, returning only the values the
// programs read (Read ops).
type Host interface {
	// Layout describes the members' parameters (metadata only).
	Layout(ctx context.Context) (Layout, error)
	// Exec runs the program's ops in order, each checked first by the
	// argument checker that every host shares (sdk/opset's Checker),
	// and returns the values of its Read ops (a nil program is an empty
	// one; a program whose builder recorded a misuse, Program.Err, fails
	// before its first op). It stops at the first op that
	// fails and returns an *OpError naming it; the effects of the ops before
	// it remain, and the Result is then undefined. An op kind, UnaryKind,
	// BinaryKind or BNMode the host does not know fails with an *OpError
	// that wraps errors.ErrUnsupported.
	Exec(ctx context.Context, p *Program) (Result, error)
}

// Tensor describes one parameter tensor inside a member's flat vector.
type Tensor struct {
	Name   string
	Shape  []int64
	Offset int64
	// Kind is "weight", "bias", "bn" (BatchNorm affine) or "rho" (the
	// softplus-σ parameter of a variational layer).
	Kind string
}

// MemberLayout describes the parameters of one member.
type MemberLayout struct {
	Arch    string
	Numel   int64
	Tensors []Tensor
	// Variational members have a ρ vector, RhoOf(m), beside their means.
	Variational bool
}

// Layout describes every member of a run.
type Layout struct {
	Members []MemberLayout
	// TrainSize is the number of training samples (N in priors and KLs).
	TrainSize int64
	// BatchSize is the configured minibatch size.
	BatchSize int64
}

// Numel returns the number of elements of a tensor of shape t.Shape.
func (t Tensor) Numel() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Segments returns the sizes of the segments of m's flat vector under by,
// in order (see Segmentation); the tensors tile the vector in Layout order.
// A layout without tensors is one tensor of shape [Numel]. An unknown
// segmentation gives nil.
func (m MemberLayout) Segments(by Segmentation) []int64 {
	ts := m.Tensors
	if len(ts) == 0 {
		ts = []Tensor{{Shape: []int64{m.Numel}}}
	}
	var out []int64
	for _, t := range ts {
		switch by {
		case PerTensor:
			out = append(out, t.Numel())
		case PerRow:
			if len(t.Shape) == 0 {
				out = append(out, 1)
				continue
			}
			row := t.Numel() / max(t.Shape[0], 1)
			for range t.Shape[0] {
				out = append(out, row)
			}
		case PerColumn:
			if len(t.Shape) < 2 {
				out = append(out, t.Numel())
				continue
			}
			for range t.Numel() / max(t.Shape[0], 1) {
				out = append(out, t.Shape[0])
			}
		default:
			return nil
		}
	}
	return out
}

// SegmentOf returns the segment of every element of m's flat vector under
// by (Segments gives their sizes): contiguous runs for PerTensor and
// PerRow; for PerColumn, element (i, j) of a tensor's 2-D view [d0, rest]
// is in that tensor's j-th column segment. An unknown segmentation gives
// nil.
func (m MemberLayout) SegmentOf(by Segmentation) []int32 {
	sizes := m.Segments(by)
	if sizes == nil {
		return nil
	}
	var n int64
	for _, z := range sizes {
		n += z
	}
	out := make([]int32, 0, n)
	if by != PerColumn {
		for s, z := range sizes {
			for range z {
				out = append(out, int32(s))
			}
		}
		return out
	}
	ts := m.Tensors
	if len(ts) == 0 {
		ts = []Tensor{{Shape: []int64{m.Numel}}}
	}
	first := int32(0) // the first column segment of the tensor
	for _, t := range ts {
		if len(t.Shape) < 2 {
			for range t.Numel() {
				out = append(out, first)
			}
			first++
			continue
		}
		cols := t.Numel() / max(t.Shape[0], 1)
		for range t.Shape[0] {
			for j := range cols {
				out = append(out, first+int32(j))
			}
		}
		first += int32(cols)
	}
	return out
}

// Matrix is a tensor of a member's layout with two or more dims, viewed as
// the matrix of Rows = d0 rows and Cols = d1·d2·… columns (a conv weight
// [out, in, kh, kw] as [out, in·kh·kw]), row-major from Offset in the flat
// vector: what the matrix ops (NewtonSchulz) act on.
type Matrix struct {
	// Tensor is the tensor's index in Tensors.
	Tensor     int
	Offset     int64
	Rows, Cols int64
}

// Matrices returns m's matrix-shaped tensors (two or more dims, none of
// them 0), in layout order. A layout without tensors (one tensor of shape
// [Numel]) has none.
func (m MemberLayout) Matrices() []Matrix {
	var out []Matrix
	for i, t := range m.Tensors {
		if len(t.Shape) < 2 || t.Numel() == 0 {
			continue
		}
		out = append(out, Matrix{Tensor: i, Offset: t.Offset, Rows: t.Shape[0], Cols: t.Numel() / t.Shape[0]})
	}
	return out
}

// ParamType is the type of a hyperparameter.
type ParamType string

// Hyperparameter types.
const (
	Float  ParamType = "float"
	Int    ParamType = "int"
	Bool   ParamType = "bool"
	String ParamType = "string"
)

// ParamSpec describes one hyperparameter: the host validates the
// experiment's TOML against these before training.
type ParamSpec struct {
	Name    string
	Type    ParamType
	Default any
	Doc     string
	// Enum lists the values a String hyperparameter may take (none: any).
	Enum []string
	// Range is the interval a Float or Int hyperparameter must lie in, as
	// "[0,1]", "(0,)", "[1,)" or "[1,batch]" (empty: any; "batch": the
	// batch size, resolved by the host); see sdk/hparams.
	Range string
}

// Info describes a plugin.
type Info struct {
	Name    string
	Version string
	// ProtocolMinor is the protocol minor the plugin speaks: leave it 0 and
	// the SDK (serve, and the host for an in-process optimizer) stamps its
	// own, ProtocolMinor.
	ProtocolMinor int
	// Features are the optional features the optimizer has.
	Features Features
	Params   []ParamSpec
}

// Stamped returns i with ProtocolMinor set to this SDK's when it is 0.
func (i Info) Stamped() Info {
	if i.ProtocolMinor == 0 {
		i.ProtocolMinor = ProtocolMinor
	}
	return i
}

// Config is what Configure receives.
type Config struct {
	// Params holds the validated hyperparameters by name (float64, int64,
	// bool or string), defaults filled in.
	Params map[string]any
	// Seed is the run's seed; the optimizer derives its own randomness from it.
	Seed int64
	// TotalSteps is the number of Step calls the run will make.
	TotalSteps int64
	// StepsPerEpoch is the number of Step calls per epoch.
	StepsPerEpoch int64
	// Members is the number of members (models) in the run; MemberCount
	// reads 0 (a Config made by hand) as 1.
	Members int
	// Handles is the namespace an optimizer that runs inside another
	// allocates its vectors from (never sent over the wire; nil for a
	// plugin's own optimizer). Read it with Namespace.
	Handles *Handles
}

// MemberCount is the number of members, at least 1.
func (c Config) MemberCount() int { return max(c.Members, 1) }

// StepInput describes one training step.
type StepInput struct {
	Step  int64 // 0-based global step
	Epoch int   // 0-based epoch
	// LR is the base learning rate the schedule gives for this step.
	LR float64
}

// StepOutput carries the step's training metrics (e.g. "loss", "acc").
//
// The metric "lr", when an optimizer that owns its update (Features.OwnsUpdate)
// reports it, is the learning rate its step used: the host's curves and
// TensorBoard show it as the run's learning rate. For an optimizer that
// steps with BaseStep the host shows the rate BaseStep used (StepInput.LR,
// or a SetLR's override of member 0's), whatever "lr" says.
type StepOutput struct {
	Metrics map[string]float64
}

// PredictiveKind says how the host evaluates a run.
type PredictiveKind int32

// Predictive kinds.
const (
	// Point evaluates member 0's live parameters.
	Point PredictiveKind = iota
	// Members averages the probabilities of the listed vectors.
	Members
	// Samples averages probabilities over MC samples of a Gaussian
	// (mean Mean, elementwise std in Std) or of the variational weights.
	Samples
)

// Predictive tells the host how to form the predictive distribution.
type Predictive struct {
	Kind PredictiveKind
	// Vecs are the parameter vectors to average over (Members kind); each
	// belongs to the member whose layout it has. Weights default to uniform.
	Vecs    []Vec
	Weights []float64
	// Mean and Std name vectors of a Gaussian (Samples kind); Std = 0 with
	// Samples means the host's own variational weights.
	Mean, Std Vec
	N         int
	// Masks, optional, holds one vector per entry of Vecs (Members kind):
	// a 0/1 mask of that vector's layout (a sparse member's active
	// weights), which the host saves beside it in the run's model file,
	// under "mask." names, and does not use to predict. A host that
	// predates the field ignores it.
	Masks []Vec
}

// Optimizer is what a plugin implements. Configure binds the host the
// optimizer drives for the rest of the run; Step is called once per
// minibatch, sends programs to that host and returns metrics.
//
// The other methods belong to optional features (Features): the host
// calls each only when the optimizer's Info declares its feature. Embed
// Defaults for those an optimizer does not have. A method that wraps
// another optimizer (Wrapper) forwards each of them to what it wraps.
type Optimizer interface {
	Info() Info
	// Configure receives the run's configuration and the host, which the
	// optimizer keeps: every later method drives it.
	Configure(ctx context.Context, h Host, cfg Config) error
	Step(ctx context.Context, in StepInput) (StepOutput, error)

	// Predictive (Features.Predictive) tells the host how to form the
	// predictive distribution: for ensembles and posteriors it is not the
	// point estimate of member 0.
	Predictive(ctx context.Context) (Predictive, error)
	// SaveState and LoadState (Features.State) checkpoint the state that
	// the optimizer keeps across steps: vecs lists the handles whose
	// contents the host saves with the checkpoint (and restores before
	// LoadState); blob is the optimizer's own small state. LoadState is
	// called after Configure.
	SaveState(ctx context.Context) (blob []byte, vecs []Vec, err error)
	LoadState(ctx context.Context, blob []byte) error
	// Finalize (Features.Finalize) acts once more after the last step of
	// the run (a resumed run included), before it is evaluated and its
	// model saved: averaging methods (SWA) recompute their average's
	// BatchNorm statistics over the training set (UpdateBN), or take a
	// last snapshot. It may Exec programs of any ops (the current batch is
	// still the last step's); its reports are dropped.
	Finalize(ctx context.Context) error
	// Resolved returns, by hyperparameter name, the values the optimizer
	// derived in Configure for hyperparameters that leave it the choice (a
	// -1 "auto", a "" "the mode's"), in Config.Params' types (float64,
	// int64, bool or string); nil: nothing derived. It is called after a
	// successful Configure; the host records the values ("resolved") apart
	// from the configuration that decides whether a run is trained again.
	Resolved() map[string]any
}

// Package builtin lists optlab's built-in optimization methods once: every
// plugin binary (plugins/*/cmd/*) serves its method from this list, and the
// methods that wrap a member method (ensembles, swa) take their member
// optimizers from it (MemberOptions). The list is a value
// (Registry returns a fresh optim.Registry), not package-level state that
// init functions fill, so a test or an in-process run can make its own and
// add to it.
//
// Adding a method: write its package under plugins/, add one line to
// methods (saying whether the wrapping methods may use it as their member),
// and give it a main that serves builtin.Constructor("name").
package builtin

import (
	"fmt"
	"slices"

	"github.com/optlab/optlab/plugins/adamw"
	"github.com/optlab/optlab/plugins/bsam"
	"github.com/optlab/optlab/plugins/compose"
	"github.com/optlab/optlab/plugins/ensembles"
	"github.com/optlab/optlab/plugins/esam"
	"github.com/optlab/optlab/plugins/msam"
	"github.com/optlab/optlab/plugins/muon"
	"github.com/optlab/optlab/plugins/otmdr"
	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/plugins/sam/variants"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/plugins/sgvb"
	"github.com/optlab/optlab/plugins/shampoo"
	"github.com/optlab/optlab/plugins/soap"
	"github.com/optlab/optlab/plugins/sparse"
	"github.com/optlab/optlab/plugins/swa"
	"github.com/optlab/optlab/sdk/optim"
)

// method is one line of the list: member says whether the methods that
// wrap a member method (ensembles, swa) may use it as their member (not
// sgvb and otmdr-sgvb, which train one variational member, nor the
// wrappers themselves, nor muon yet: its hyperparameters would join the
// wrappers' schemas). Whether a wrapper may also schedule its rate is
// the member's own declaration, optim.Features.BaseStep.
type method struct {
	optim.Entry
	member bool
}

// methods is the list of built-in methods, in the order of Registry (and
// of the wrapping methods' schemas, for their members).
func methods() []method {
	return []method{
		{optim.Entry{Name: "sgd", New: sgd.New,
			Doc: "the host's base optimizer on one full-batch gradient per step (SGD with momentum or Adam)"}, true},
		{optim.Entry{Name: "sam", New: func() optim.Optimizer { return sam.NewWith(Rules()) },
			Doc: "Sharpness-Aware Minimization (Foret et al.), with ASAM and m-sharpness"}, true},
		{optim.Entry{Name: "looksam", New: variants.WithRules(Rules(), variants.NewLookSAM),
			Doc: "LookSAM (Liu et al.): full SAM every k steps, the stored orthogonal component of the SAM gradient between"}, false},
		{optim.Entry{Name: "aesam", New: variants.WithRules(Rules(), variants.NewAESAM),
			Doc: "AE-SAM (Jiang et al.): SAM only on steps whose ‖g‖² exceeds its running mean plus c·σ, decided on the device"}, false},
		{optim.Entry{Name: "fsam", New: variants.WithRules(Rules(), variants.NewFSAM),
			Doc: "Friendly-SAM (Li et al.): the perturbation along g minus σ times an EMA of past gradients"}, false},
		{optim.Entry{Name: "wsam", New: variants.WithRules(Rules(), variants.NewWSAM),
			Doc: "WSAM (Yue et al.): sharpness weighted γ/(1−γ) as a regulariser, decoupled from the base step"}, false},
		{optim.Entry{Name: "gsam", New: variants.WithRules(Rules(), variants.NewGSAM),
			Doc: "GSAM (Zhuang et al.): SAM's gradient minus α times the first gradient's part orthogonal to it, ρ optionally following the rate"}, false},
		{optim.Entry{Name: "bsam", New: bsam.New,
			Doc: "Bayesian SAM (Möllenhoff & Khan): a Gaussian posterior with its own update"}, true},
		{optim.Entry{Name: "otmdr", New: func() optim.Optimizer { return otmdr.NewWith(Rules()) },
			Doc: "OT-MDR, optimal-transport model distributional robustness (Nguyen et al.), one model or an ensemble"}, true},
		{optim.Entry{Name: "sgvb", New: sgvb.New,
			Doc: "SGVB (Bayes by backprop) on a mean-field Gaussian Bayesian neural network"}, false},
		{optim.Entry{Name: "otmdr-sgvb", New: sgvb.NewOTMDR,
			Doc: "OT-MDR on a mean-field Gaussian Bayesian neural network"}, false},
		{optim.Entry{Name: "ensembles", New: func() optim.Optimizer { return ensembles.New(MemberOptions()) },
			Doc: "deep, snapshot and FGE ensembles, each member's step done by a member optimizer"}, false},
		{optim.Entry{Name: "swa", New: func() optim.Optimizer { return swa.New(MemberOptions()) },
			Doc: "stochastic weight averaging (Izmailov et al.) on top of a member method: SWA, SWA-SAM, SWA-OT-MDR"}, false},
		{optim.Entry{Name: "adamw", New: adamw.New,
			Doc: "AdamW (Loshchilov & Hutter) as torch.optim.AdamW computes it; also an update rule of sam and otmdr (update = \"adamw\")"}, false},
		{optim.Entry{Name: "muon", New: muon.New,
			Doc: "Muon (Keller Jordan): momentum orthogonalised by Newton–Schulz on matrix tensors, AdamW on the others"}, false},
		{optim.Entry{Name: "shampoo", New: shampoo.New,
			Doc: "Shampoo (Gupta et al.) with Distributed Shampoo's defaults: blocked Kronecker factors, inverse 4th roots every k steps, Adam grafting"}, false},
		{optim.Entry{Name: "soap", New: soap.New,
			Doc: "SOAP (Vyas et al.): Adam in the eigenbasis of Shampoo's factors, the basis sorted and refreshed by a power iteration every k steps, as soap.py"}, false},
		{optim.Entry{Name: "dst", New: sparse.NewDST,
			Doc: "DST ensemble (Liu et al., FreeTickets): independent members, each trained with dynamic sparse training"}, false},
		{optim.Entry{Name: "edst", New: sparse.NewEDST,
			Doc: "EDST ensemble (Liu et al., FreeTickets): sparse tickets of one dynamic-sparse-training run"}, false},
		{optim.Entry{Name: "esam", New: func() optim.Optimizer { return esam.NewWith(Rules()) },
			Doc: "Efficient SAM (Du et al.): SAM's perturbation on a random subset of the tensors, the second pass on the samples whose loss rises most"}, false},
		{optim.Entry{Name: "msam", New: msam.New,
			Doc: "Momentum-SAM (Becker et al.): the perturbation along the base SGD's negative momentum, one gradient per step"}, false},
	}
}

// Rules returns the built-in update rules, which the methods with
// optim.Features.UpdateRule (sam, otmdr) may take as their update
// ("update" = the rule's name) instead of the host's base step.
func Rules() compose.Rules {
	return compose.Rules{
		{Name: "adamw", New: adamw.NewRule, Doc: "AdamW as torch.optim.AdamW (decoupled weight decay)"},
		{Name: "muon", New: muon.NewRule, Doc: "Muon (Keller Jordan) on matrix tensors, AdamW on the others"},
		{Name: "shampoo", New: shampoo.NewRule, Doc: "Shampoo (Gupta et al.) with Distributed Shampoo's defaults, grafted to Adam"},
		{Name: "soap", New: soap.NewRule, Doc: "SOAP (Vyas et al.): Adam in the eigenbasis of Shampoo's factors, as soap.py"},
	}
}

// Registry returns a fresh registry of every built-in method, each with a
// one-line Doc.
func Registry() *optim.Registry {
	r := &optim.Registry{}
	for _, m := range methods() {
		mustAdd(r, m.Entry)
	}
	return r
}

// MemberOptions returns the options of the built-in methods that wrap a
// member method (ensembles, swa): the built-in methods they may use as
// their member.
func MemberOptions() compose.Options {
	o := compose.Options{Members: &optim.Registry{}}
	for _, m := range methods() {
		if m.member {
			mustAdd(o.Members, m.Entry)
		}
	}
	return o
}

// EnsembleOptions returns the built-in ensembles method's options:
// MemberOptions, under the name its callers use.
func EnsembleOptions() ensembles.Options { return MemberOptions() }

// Constructor returns the constructor of the built-in method name, for a
// plugin's main: serve.Serve(builtin.Constructor("sam")). It panics if
// there is no such method, which TestCommands rules out for the mains of
// plugins/*/cmd.
func Constructor(name string) func() optim.Optimizer {
	i := slices.IndexFunc(methods(), func(m method) bool { return m.Name == name })
	if i < 0 {
		panic(fmt.Sprintf("builtin: no method %q (known: %v)", name, Registry().Names()))
	}
	return methods()[i].New
}

// mustAdd adds e to r; methods lists every name once (TestRegistry), so a
// failure is a mistake in this file.
func mustAdd(r *optim.Registry, e optim.Entry) {
	if err := r.Add(e); err != nil {
		panic("builtin: " + err.Error())
	}
}

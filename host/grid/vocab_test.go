package grid

import (
	"testing"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/model"
)

// TestArchVocabulary: an experiment's arch names go to model.Zoo.Make as
// they are, so the two packages' "torchscript:" prefixes (written out in
// each: package experiment does not import package model, which needs
// libtorch) must agree.
func TestArchVocabulary(t *testing.T) {
	if experiment.TorchScriptPrefix != model.TorchScriptPrefix {
		t.Fatalf("experiment.TorchScriptPrefix %q, model.TorchScriptPrefix %q", experiment.TorchScriptPrefix, model.TorchScriptPrefix)
	}
	arch := experiment.TorchScriptPrefix + "net.pt"
	a, okA := experiment.TorchScriptPath(arch)
	b, okB := model.TorchScriptPath(arch)
	if a != b || okA != okB || !okA {
		t.Errorf("TorchScriptPath(%q): experiment %q %v, model %q %v", arch, a, okA, b, okB)
	}
}

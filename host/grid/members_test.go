package grid

import (
	"strings"
	"testing"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/sdk/optim"
)

func TestCheckMembers(t *testing.T) {
	one := optim.Info{Name: "solo"}
	many := optim.Info{Name: "team", Features: optim.Features{Members: true}}
	tests := []struct {
		archs []string
		info  optim.Info
		err   string
	}{
		{[]string{"cnn"}, one, ""},
		{[]string{"cnn", "mlp"}, one, ""},
		{[]string{"cnn*3"}, many, ""},
		{[]string{"cnn", "cnn*3"}, one, `plugin solo trains one member (its Info lacks the "members" feature), but archs entry "cnn*3" has 3 members`},
		{[]string{"resnet18+mlp"}, one, `archs entry "resnet18+mlp" has 2 members`},
	}
	for _, tt := range tests {
		exp := &experiment.Experiment{Model: experiment.Model{Archs: tt.archs}}
		err := checkMembers(exp, tt.info)
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("archs %v, %s: err = %v, want %q", tt.archs, tt.info.Name, err, tt.err)
		}
	}
}

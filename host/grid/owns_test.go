package grid

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/sdk/optim"
)

// owner is SGD that declares it owns its update (only its Info matters
// to Prepare).
type owner struct{ optim.Optimizer }

func (o owner) Info() optim.Info {
	i := o.Optimizer.Info()
	i.Name = "owner"
	i.Features.OwnsUpdate = true
	return i
}

// Prepare (and so host check) refuses the base optimizer's keys that a
// plugin owning its update would ignore, citing their lines, and the plan
// records that the plugin owns its update.
func TestPrepareOwnsUpdate(t *testing.T) {
	reg := builtin.Registry()
	sgd, _ := reg.Lookup("sgd")
	if err := reg.Add(optim.Entry{Name: "owner", New: func() optim.Optimizer { return owner{sgd.New()} }}); err != nil {
		t.Fatal(err)
	}
	head := "name = \"o\"\n[train.optimizer]\nmomentum = 0.5\n"
	tests := []struct {
		name, methods string
		want          []string // substrings of the error; none: no error
	}{
		{"lr only", "[[method]]\nname = \"Own\"\nplugin = \"owner\"\n[method.optimizer]\nlr = 0.01\n", []string{
			`o.toml:3: train.optimizer.momentum would be ignored: every method's plugin applies its own update (feature "owns-update", or an update rule other than "base")`,
		}},
		{"its own base keys", "[[method]]\nname = \"Own\"\nplugin = \"owner\"\n[method.optimizer]\nlr = 0.01\nweight_decay = 0.1\n" +
			"[[method]]\nname = \"SGD\"\nplugin = \"sgd\"\n", []string{
			`o.toml:9: method "Own": optimizer.weight_decay would be ignored: the method's plugin applies its own update`,
		}},
		{"keys for the other methods", "[[method]]\nname = \"Own\"\nplugin = \"owner\"\n[[method]]\nname = \"SGD\"\nplugin = \"sgd\"\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "o.toml")
			if err := os.WriteFile(path, []byte(head+tc.methods), 0o644); err != nil {
				t.Fatal(err)
			}
			exp, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Prepare(context.Background(), exp, Plugins{Output: io.Discard, InProcess: reg})
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				for _, run := range p.Runs {
					if got, want := p.Method(run).OwnsUpdate, run.Method.Name == "Own"; got != want {
						t.Errorf("%s: OwnsUpdate = %v, want %v", run.Key, got, want)
					}
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), strings.Replace(w, "o.toml", path, 1)) {
					t.Errorf("error\n%v\nwant it to contain\n%s", err, w)
				}
			}
		})
	}
}

package grid

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/plugins/builtin"
)

// Prepare reports the problems of Validate and those of the plugins'
// schemas in one pass, as one ErrorList in line order, naming a method
// the same way in both (issue 39): a file need not be fixed once for the
// values and again for the hyperparameters.
func TestPrepareReportsAll(t *testing.T) {
	head := "name = \"p\"\n[train]\nbatch_size = 64\n" // lines 1-3
	tests := []struct {
		name, body string
		want       []string // the error's lines, in order
	}{
		{"values and hyperparameters", "[[method]]\nname = \"AdamW\"\nplugin = \"sam\"\n[method.optimizer]\nweight_decay = -1.0\n[method.params]\nrho = -1.0\n", []string{
			`p.toml:8: method "AdamW": optimizer.weight_decay must be ≥ 0 (got -1)`,
			`p.toml:10: method "AdamW": params.rho -1 is out of range [0,): want ≥ 0`,
		}},
		{"a key of another optimizer and an unknown parameter", "[[method]]\nname = \"S\"\nplugin = \"sam\"\n[method.params]\nrhoo = 0.1\n[method.optimizer]\nbetas = [0.8, 0.9]\n", []string{
			`p.toml:8: method "S": unknown parameter "rhoo"; did you mean "rho"?`,
			`p.toml:10: method "S": optimizer.betas applies only to optimizer adam`,
		}},
		{"in line order across methods and [train]", "[[method]]\nname = \"A\"\nplugin = \"sam\"\n[method.params]\nrho = -1.0\n[[method]]\nname = \"B\"\nplugin = \"sgd\"\n[method.optimizer]\nlr = -1\n", []string{
			`p.toml:8: method "A": params.rho -1 is out of range [0,): want ≥ 0`,
			`p.toml:13: method "B": optimizer.lr must be > 0 (got -1)`,
		}},
		// A method whose plugin is refused is not started; the others are.
		{"a plugin that cannot be started", "[[method]]\nname = \"A\"\nplugin = \"bin/sam\"\n[method.params]\nrhoo = 1\n[[method]]\nname = \"B\"\nplugin = \"sam\"\n[method.params]\nrho = -1.0\n", []string{
			`p.toml:6: method "A": plugin "bin/sam" must be a plugin name of letters, digits, '.', '_' and '-' (use path for a binary)`,
			`p.toml:13: method "B": params.rho -1 is out of range [0,): want ≥ 0`,
		}},
		// A bound that follows from a refused value adds nothing: m is
		// not checked against a batch size of -1.
		{"a bound from a refused value", "[[method]]\nname = \"B\"\nplugin = \"bsam\"\n[method.params]\nm = 8\n", []string{
			`p.toml:3: train.batch_size must be > 0 (got -1)`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := head + tc.body
			if tc.name == "a bound from a refused value" {
				src = strings.Replace(src, "batch_size = 64", "batch_size = -1", 1)
			}
			path := filepath.Join(t.TempDir(), "p.toml")
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			exp, err := experiment.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Prepare(context.Background(), exp, Plugins{Output: io.Discard, InProcess: builtin.Registry()})
			var list experiment.ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error %v (%T), want an experiment.ErrorList", err, err)
			}
			got := strings.Split(strings.ReplaceAll(err.Error(), path, "p.toml"), "\n")
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("error\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

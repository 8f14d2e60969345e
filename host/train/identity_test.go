package train

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/identity"
	"github.com/optlab/optlab/host/results"
)

// A run's record holds its configuration as the identity declaration
// renders it, and the version of that declaration.
func TestRecordIdentity(t *testing.T) {
	r := &Runner{Exp: experiment.Default()}
	run := experiment.Run{Key: "k", Label: "SGD"}
	m := Optimizer{Plugin: "sgd", Params: map[string]any{"x": 1.0}}
	rec := r.Record(run, m)
	if rec.Identity != identity.Version {
		t.Errorf("record's identity version %d, want %d", rec.Identity, identity.Version)
	}
	if want := r.Config(run, m).Map(); !reflect.DeepEqual(rec.Config, want) {
		t.Errorf("record's config %v, want %v", rec.Config, want)
	}
}

// A saved training state records the identity version of its
// configuration: a state without one (saved before versions) or of this
// version resumes under the same configuration, one of a version this
// optlab does not know is refused, naming it.
func TestStateIdentityVersion(t *testing.T) {
	dir := t.TempDir()
	r := &Runner{Exp: experiment.Default(), Checkpoints: &results.Layout{Dir: dir}}
	run := experiment.Run{Key: "k", Label: "SGD"}
	cfg := r.Config(run, Optimizer{Plugin: "sgd"}).Map()
	saved, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state.safetensors")
	for _, v := range []string{"", "1", strconv.Itoa(identity.Version), strconv.Itoa(identity.Version + 1)} {
		meta := map[string]string{metaConfig: string(saved)}
		if v != "" {
			meta[metaIdentity] = v
		}
		if err := checkpoint.Write(path, nil, meta); err != nil {
			t.Fatal(err)
		}
		err := r.retireStaleState(run, path, cfg)
		if v == strconv.Itoa(identity.Version+1) {
			if want := fmt.Sprintf("identity version %s", v); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("state of version %s: %v, want an error naming %s", v, err, want)
			}
			continue
		}
		if err != nil {
			t.Errorf("state of version %q: %v", v, err)
		}
	}
}

// Package nullhost times the program model itself: every built-in method's
// plugin against a host that does no work (BenchmarkNullHostStep).
package nullhost

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/optlab/optlab/host/plugin"
	"github.com/optlab/optlab/sdk/opset"
	"github.com/optlab/optlab/sdk/optim"
)

// beforeEnv names a folder of plugin binaries built from an earlier optlab
// (e.g. the release before protocol minor 5) that BenchmarkNullHostStep
// times side by side with this checkout's.
const beforeEnv = "OPTLAB_BEFORE_PLUGINS"

// nullHost is an optim.Host that does no work: it answers every program at
// once, with 1 for every value read, and counts what the plugin asks of it.
// Timing a plugin's Step against it measures what the program model itself
// costs per step: RPCs, encoding, and the round trips a device would wait
// for.
type nullHost struct {
	layout optim.Layout

	mu           sync.Mutex
	execs, reads int // since the last take
	readExecs    int // Execs that read anything: blocking device syncs
}

// Layout implements optim.Host.
func (h *nullHost) Layout(context.Context) (optim.Layout, error) { return h.layout, nil }

// Exec implements optim.Host.
func (h *nullHost) Exec(_ context.Context, p *optim.Program) (optim.Result, error) {
	var vals []float64
	if p != nil {
		for _, op := range p.Ops {
			if _, ok := op.(optim.Read); ok {
				vals = append(vals, 1)
			}
		}
	}
	h.mu.Lock()
	h.execs++
	h.reads += len(vals)
	if len(vals) > 0 {
		h.readExecs++
	}
	h.mu.Unlock()
	return opset.NewResult(p, vals)
}

// take returns the counts since the last call and resets them.
func (h *nullHost) take() (execs, reads, readExecs int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	execs, reads, readExecs = h.execs, h.reads, h.readExecs
	h.execs, h.reads, h.readExecs = 0, 0, 0
	return
}

// nullCase is one method of BenchmarkNullHostStep.
type nullCase struct {
	name, bin   string
	params      map[string]any
	members     int
	variational bool
}

// BenchmarkNullHostStep times a step of every built-in method against a
// host that does no work, so what remains is the program model's own cost
// per step: Exec calls, values read back (each Exec that reads one is a
// blocking device sync on a GPU) and the latency (p10 and median of the
// Step call, plugin process and gRPC included). With OPTLAB_BEFORE_PLUGINS
// set to a folder of plugin binaries of an earlier optlab, each method runs
// with those and with this checkout's, interleaved step by step, in one
// run; the table goes to the benchmark log. docs/BENCHMARKS.md §10 has the
// command and the figures.
func BenchmarkNullHostStep(b *testing.B) {
	cases := []nullCase{
		{name: "SGD", bin: "sgd"},
		{name: "SAM", bin: "sam"},
		{name: "ASAM (weights)", bin: "sam", params: map[string]any{"adaptive": true, "adaptive_scope": "weights"}},
		{name: "SAM m=4", bin: "sam", params: map[string]any{"m": int64(4)}},
		{name: "bSAM", bin: "bsam"},
		{name: "OT-MDR K=1", bin: "otmdr"},
		{name: "OT-MDR K=2", bin: "otmdr", params: map[string]any{"particles": int64(2)}},
		{name: "OT-MDR reference", bin: "otmdr", params: map[string]any{"mode": "reference"}},
		{name: "OT-MDR joint (2 members)", bin: "otmdr", params: map[string]any{"joint": true}, members: 2},
		{name: "SGVB", bin: "sgvb", variational: true},
		{name: "OT-MDR-SGVB", bin: "otmdr-sgvb", variational: true},
		{name: "deep ensemble of SAM (2)", bin: "ensembles", params: map[string]any{"member": "sam"}, members: 2},
	}
	if pluginDir == "" {
		b.Fatal("plugins were not built (TestMain builds them for -bench)")
	}
	builds := [][2]string{{"after", pluginDir}}
	if dir := os.Getenv(beforeEnv); dir != "" {
		builds = append([][2]string{{"before", dir}}, builds...)
	}
	const warmup, steps = 20, 300
	var rows []string
	for _, c := range cases {
		type run struct {
			c                       *plugin.Client
			h                       *nullHost
			times                   []time.Duration
			execs, reads, readExecs int
		}
		runs := make([]*run, len(builds))
		for i, bd := range builds {
			r := &run{h: newNullHost(c)}
			r.c = launchPath(b, filepath.Join(bd[1], c.bin))
			cfg := optim.Config{Params: c.params, Seed: 1, TotalSteps: warmup + steps, StepsPerEpoch: 100, Members: max(c.members, 1)}
			if err := r.c.Configure(context.Background(), r.h, cfg); err != nil {
				b.Fatalf("%s (%s): configure: %v", c.name, bd[0], err)
			}
			r.h.take()
			runs[i] = r
		}
		for s := range warmup + steps {
			for i, r := range runs { // interleaved: the builds share the machine's noise
				start := time.Now()
				if _, err := r.c.Step(context.Background(), optim.StepInput{Step: int64(s), LR: 0.1}); err != nil {
					b.Fatalf("%s (%s): step %d: %v", c.name, builds[i][0], s, err)
				}
				took := time.Since(start)
				e, rd, re := r.h.take()
				if s >= warmup {
					r.times = append(r.times, took)
					r.execs, r.reads, r.readExecs = r.execs+e, r.reads+rd, r.readExecs+re
				}
			}
		}
		for i, r := range runs {
			slices.Sort(r.times)
			p10, med := r.times[len(r.times)/10], r.times[len(r.times)/2]
			rows = append(rows, fmt.Sprintf("| %s | %s | %.2f | %.2f | %.2f | %.3f | %.3f |", c.name, builds[i][0],
				float64(r.execs)/steps, float64(r.readExecs)/steps, float64(r.reads)/steps,
				float64(p10.Microseconds())/1000, float64(med.Microseconds())/1000))
			_ = r.c.Close()
		}
	}
	b.Logf("\n| method | build | Execs/step | blocking reads/step | values read/step | p10 ms | median ms |\n|---|---|---|---|---|---|---|\n%s", strings.Join(rows, "\n"))
	for range b.N {
	}
}

// newNullHost returns the null host of a case: one member (or c.members) of
// a 1M-parameter layout, variational when the method needs it.
func newNullHost(c nullCase) *nullHost {
	l := optim.Layout{TrainSize: 50000, BatchSize: 128}
	for range max(c.members, 1) {
		l.Members = append(l.Members, optim.MemberLayout{Arch: "null", Numel: 1 << 20,
			Tensors:     []optim.Tensor{{Name: "fc.weight", Shape: []int64{1024, 1024}, Kind: "weight"}},
			Variational: c.variational})
	}
	return &nullHost{layout: l}
}

// pluginDir holds this checkout's plugin binaries, built by TestMain for
// -bench.
var pluginDir string

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		dir, err := os.MkdirTemp("", "optlab-nullhost-plugins")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		for name, pkg := range map[string]string{"sam": "sam", "sgd": "sgd", "otmdr": "otmdr", "ensembles": "ensembles",
			"bsam": "bsam", "sgvb": "sgvb", "otmdr-sgvb": "sgvb"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "github.com/optlab/optlab/plugins/"+pkg+"/cmd/"+name)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Fprintf(os.Stderr, "building plugin %s: %v\n", name, err)
				return 1
			}
		}
		pluginDir = dir
	}
	defer plugin.CleanupAll()
	return m.Run()
}

// launchPath starts a plugin binary by its path.
func launchPath(tb testing.TB, path string) *plugin.Client {
	tb.Helper()
	c, err := plugin.Launch(context.Background(), plugin.LaunchSpec{Path: path,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "bench", Level: hclog.Error, Output: os.Stderr})})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

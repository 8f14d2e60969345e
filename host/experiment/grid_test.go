package experiment

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestParseArch(t *testing.T) {
	tests := []struct {
		spec    string
		canon   string
		members []string
		err     string
	}{
		{spec: "resnet18", canon: "resnet18", members: []string{"resnet18"}},
		{spec: "resnet18+mobilenet", canon: "resnet18+mobilenet", members: []string{"resnet18", "mobilenet"}},
		{spec: "resnet10*5", canon: "resnet10*5", members: []string{"resnet10", "resnet10", "resnet10", "resnet10", "resnet10"}},
		{spec: " resnet18 * 2 + mobilenet ", canon: "resnet18*2+mobilenet", members: []string{"resnet18", "resnet18", "mobilenet"}},
		{spec: "cnn*1", canon: "cnn", members: []string{"cnn"}},
		{spec: "wrn28-10-ref+efficientnet-b0", canon: "wrn28-10-ref+efficientnet-b0", members: []string{"wrn28-10-ref", "efficientnet-b0"}},
		{spec: "cnn*1024", canon: "cnn*1024", members: make([]string, 1024)},
		{spec: "torchscript:nets/my net.pt", canon: "torchscript:nets/my net.pt", members: []string{"torchscript:nets/my net.pt"}},
		{spec: "torchscript:/a/b.pt*2 + cnn", canon: "torchscript:/a/b.pt*2+cnn", members: []string{"torchscript:/a/b.pt", "torchscript:/a/b.pt", "cnn"}},
		{spec: "torchscript: ", err: `"torchscript:" names no file`},
		{spec: "torch:net.pt", err: `invalid arch name "torch:net.pt"`},
		{spec: "", err: "empty arch spec"},
		{spec: "cnn+", err: "empty arch name"},
		{spec: "*3", err: "empty arch name"},
		{spec: "cnn*0", err: `member count "0" must be an integer ≥ 1`},
		{spec: "cnn*-2", err: "must be an integer ≥ 1"},
		{spec: "cnn*+2", err: "must be an integer ≥ 1"},
		{spec: "cnn*x", err: "must be an integer ≥ 1"},
		{spec: "cnn*2*3", err: "must be an integer ≥ 1"},
		{spec: "cnn*", err: "must be an integer ≥ 1"},
		{spec: "res net", err: `invalid arch name "res net"`},
		{spec: "cnn*1000+mlp*25", err: "more than 1024 members"},
		{spec: "cnn*99999999999999999999", err: "must be an integer ≥ 1"},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			canon, members, err := ParseArch(tc.spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseArch(%q) error = %v, want %q", tc.spec, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.members) == 1024 {
				for i := range tc.members {
					tc.members[i] = "cnn"
				}
			}
			if canon != tc.canon || !reflect.DeepEqual(members, tc.members) {
				t.Errorf("ParseArch(%q) = %q, %q; want %q, %q", tc.spec, canon, members, tc.canon, tc.members)
			}
		})
	}
}

func gridExperiment(t *testing.T) *Experiment {
	t.Helper()
	src := `name = "g"
[model]
archs = ["resnet18", "resnet10 * 3", "resnet18+mobilenet"]
[train]
seeds = [2, 1]
[[method]]
name = "SGD"
plugin = "sgd"
[[method]]
name = "SAM"
plugin = "sam"
[method.params]
rho = 0.1
`
	e, err := Parse([]byte(src), "g.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(e, testArchs()); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestGrid(t *testing.T) {
	runs := Grid(gridExperiment(t))
	wantKeys := []string{
		"method=SGD/arch=resnet18/seed=2",
		"method=SGD/arch=resnet18/seed=1",
		"method=SGD/arch=resnet10*3/seed=2",
		"method=SGD/arch=resnet10*3/seed=1",
		"method=SGD/arch=resnet18+mobilenet/seed=2",
		"method=SGD/arch=resnet18+mobilenet/seed=1",
		"method=SAM/arch=resnet18/seed=2",
		"method=SAM/arch=resnet18/seed=1",
		"method=SAM/arch=resnet10*3/seed=2",
		"method=SAM/arch=resnet10*3/seed=1",
		"method=SAM/arch=resnet18+mobilenet/seed=2",
		"method=SAM/arch=resnet18+mobilenet/seed=1",
	}
	if len(runs) != len(wantKeys) {
		t.Fatalf("got %d runs, want %d", len(runs), len(wantKeys))
	}
	for i, r := range runs {
		if r.Index != i || r.Key != wantKeys[i] {
			t.Errorf("run %d: Index %d Key %q, want %d %q", i, r.Index, r.Key, i, wantKeys[i])
		}
		if r.Key != RunKey(r.Method.Name, r.Arch, r.Seed) {
			t.Errorf("run %d: Key %q disagrees with RunKey", i, r.Key)
		}
	}
	if got := runs[3].Members; !reflect.DeepEqual(got, []string{"resnet10", "resnet10", "resnet10"}) {
		t.Errorf("members of %s = %q", runs[3].Key, got)
	}
	if got := runs[10].Members; !reflect.DeepEqual(got, []string{"resnet18", "mobilenet"}) {
		t.Errorf("members of %s = %q", runs[10].Key, got)
	}
	if runs[7].Method.Params["rho"] != 0.1 || runs[7].Seed != 1 || runs[7].Arch != "resnet18" {
		t.Errorf("run 7 = %+v", runs[7])
	}
	// Deterministic: a second expansion is identical.
	if again := Grid(gridExperiment(t)); !reflect.DeepEqual(runs, again) {
		t.Error("Grid is not deterministic")
	}
}

func TestGridEmptyAndInvalid(t *testing.T) {
	e := Default()
	if runs := Grid(e); len(runs) != 0 {
		t.Errorf("no methods: got %d runs", len(runs))
	}
	e.Methods = []Method{{Name: "m"}}
	e.Model.Archs = []string{"cnn*0"}
	runs := Grid(e)
	if len(runs) != 1 || runs[0].Arch != "cnn*0" || runs[0].Members != nil {
		t.Errorf("invalid spec: got %+v", runs)
	}
}

func TestShard(t *testing.T) {
	runs := Grid(gridExperiment(t))
	for _, n := range []int{1, 2, 3, 5, 7, 12, 13, 40} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			seen := map[string]int{}
			for i := 1; i <= n; i++ {
				shard, err := Shard(runs, i, n)
				if err != nil {
					t.Fatal(err)
				}
				for j, r := range shard {
					if j > 0 && r.Index <= shard[j-1].Index {
						t.Errorf("shard %d/%d out of order", i, n)
					}
					if prev, dup := seen[r.Key]; dup {
						t.Errorf("run %s in shards %d and %d", r.Key, prev, i)
					}
					seen[r.Key] = i
				}
				again, _ := Shard(runs, i, n)
				if !reflect.DeepEqual(shard, again) {
					t.Errorf("shard %d/%d not deterministic", i, n)
				}
			}
			if len(seen) != len(runs) {
				t.Errorf("union of %d shards has %d runs, want %d", n, len(seen), len(runs))
			}
		})
	}
}

func TestShardErrors(t *testing.T) {
	tests := []struct{ i, n int }{{0, 1}, {2, 1}, {1, 0}, {-1, 3}, {4, 3}}
	for _, tc := range tests {
		if _, err := Shard(nil, tc.i, tc.n); err == nil {
			t.Errorf("Shard(%d, %d) succeeded", tc.i, tc.n)
		}
	}
}

func TestMilestoneEpochs(t *testing.T) {
	tests := []struct {
		milestones []float64
		epochs     int
		want       []float64
	}{
		{[]float64{0.3, 0.6, 0.8}, 200, []float64{60, 120, 160}},
		{[]float64{0.5}, 3, []float64{1.5}},
		{[]float64{100, 150}, 200, []float64{100, 150}},
		{nil, 10, []float64{}},
	}
	for _, tc := range tests {
		got := Schedule{Milestones: tc.milestones}.MilestoneEpochs(tc.epochs)
		if len(got) != len(tc.want) {
			t.Errorf("MilestoneEpochs(%v, %d) = %v, want %v", tc.milestones, tc.epochs, got, tc.want)
			continue
		}
		for i := range got {
			if diff := got[i] - tc.want[i]; diff > 1e-9 || diff < -1e-9 {
				t.Errorf("MilestoneEpochs(%v, %d) = %v, want %v", tc.milestones, tc.epochs, got, tc.want)
				break
			}
		}
	}
}

package experiment

import (
	"strings"
	"testing"
)

// budgetFile is an experiment with a gradient budget and methods written
// after it.
func budgetFile(train, methods string) string {
	return "name = \"t\"\n[train]\n" + train + "\n[train.schedule]\nkind = \"cosine\"\n\n" + methods
}

// A method's [method.train] budget replaces the experiment's for its runs
// only; Horizon is the budget, or the epochs without one.
func TestBudgetPerMethod(t *testing.T) {
	src := budgetFile("budget = 20", "[[method]]\nname = \"SGD 2x\"\nplugin = \"sgd\"\n[method.train]\nbudget = 40\n\n[[method]]\nname = \"SAM\"\nplugin = \"sam\"\n")
	e, err := Parse([]byte(src), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(e, testArchs()); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range Grid(e) {
		tr := r.Experiment(e).Train
		got[r.Label] = tr.Horizon()
		if tr.HorizonKey() != "train.budget" {
			t.Errorf("%s: horizon key %q", r.Label, tr.HorizonKey())
		}
	}
	if got["SGD 2x"] != 40 || got["SAM"] != 20 {
		t.Errorf("horizons %v, want SGD 2x 40 and SAM 20", got)
	}
	if h := Default().Train.Horizon(); h != 10 {
		t.Errorf("default horizon %d, want train.epochs' 10", h)
	}
}

func TestBudgetErrors(t *testing.T) {
	method := "[[method]]\nname = \"A\"\nplugin = \"sgd\"\n"
	tests := []struct {
		name, train, method, want string
	}{
		{"budget and epochs", "epochs = 5\nbudget = 10", method,
			"train.budget replaces train.epochs, which the file sets too (5)"},
		{"negative", "budget = -1", method, "train.budget must be ≥ 0 (got -1)"},
		{"a method's budget with epochs", "epochs = 5", method + "[method.train]\nbudget = 10\n",
			`method "A": train.budget replaces train.epochs, which the file sets too (5)`},
		{"a method's budget negative", "budget = 10", method + "[method.train]\nbudget = -3\n",
			`method "A": train.budget must be ≥ 0 (got -3)`},
		{"warm-up counted in budget epochs", "budget = 2\n[train.schedule]\nwarmup_epochs = 2", method,
			"must be < train.budget = 2 (got 2)"},
		{"unknown [method.train] key", "budget = 10", method + "[method.train]\nepochs = 3\n",
			`unknown key "train.epochs"`},
		{"a sweep in [method.train]", "budget = 10", method + "[method.train]\nbudget = [10, 20]\n",
			"[method.train] takes one value per key, not a sweep: sweep the key in [train]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "name = \"t\"\n[train]\n" + tc.train + "\n\n" + tc.method
			e, err := Parse([]byte(src), "t.toml")
			if err == nil {
				err = Validate(e, testArchs())
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error\n%v\nwant it to contain\n%s", err, tc.want)
			}
		})
	}
}

package experiment

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxMembers bounds the number of members one arch spec may expand to.
const MaxMembers = 1024

// Run is one cell of the experiment grid: one method, with one setting of
// its swept values, trained on one arch spec with one seed.
type Run struct {
	// Index is the run's 0-based position in Grid's order.
	Index int
	// Method is the method to run (a copy; its maps are shared with the
	// Experiment and must not be modified). When the method sweeps a
	// parameter, Params holds this run's value in place of the list.
	Method Method
	// Setting lists the run's swept values (method parameters first, in
	// line order, then the keys of SweepKeys, in file order); empty when
	// nothing is swept.
	Setting []Setting
	// Label is the run's row label: the method name, followed by its
	// setting when there is one, "SAM rho=0.05 lr=0.1".
	Label string
	// Arch is the canonical arch spec (see ParseArch), e.g. "resnet10*5".
	Arch string
	// Members lists the architecture of each member, e.g. five times
	// "resnet10".
	Members []string
	// Seed is the run's seed.
	Seed int64
	// Key is "method=<label>/arch=<arch>/seed=<seed>", unique within a
	// validated experiment and stable across edits that do not change
	// those values; use it to match results to runs (e.g. to skip runs
	// already in runs.jsonl). A run that sweeps nothing has the key it
	// had before sweeps existed, "method=SAM/arch=cnn/seed=1".
	Key string
}

// Experiment returns e as the run sees it: e itself when the run sweeps no
// key of SweepKeys and its method writes neither [method.optimizer] nor
// [method.schedule], else a copy whose Train and Data hold the run's
// values (its Data.LabelNoise its rate and seed, its Train.Optimizer and
// Train.Schedule its method's, see Method.Train; sharing everything else
// with e). Apply it to the experiment the run is trained with, after any
// change made to e since Grid (e.g. a device override).
func (r Run) Experiment(e *Experiment) *Experiment {
	return methodView(withSettings(e, r.Setting), r.Method)
}

// SettingString returns the run's setting as its label writes it,
// "rho=0.05 lr=0.1", or "" when nothing is swept.
func (r Run) SettingString() string {
	parts := make([]string, len(r.Setting))
	for i, s := range r.Setting {
		parts[i] = s.String()
	}
	return strings.Join(parts, " ")
}

// ParseArch parses a member spec: '+'-separated terms, each "arch" (one
// member) or "arch*N" (N ≥ 1 members); blanks around names, '+' and '*'
// are ignored. An arch name is made of letters, digits, '.', '_' and '-'.
// It returns the canonical spec (terms joined by '+', "*N" only for N > 1)
// and the member list in order, e.g. "resnet18 + mobilenet*2" gives
// "resnet18+mobilenet*2" and [resnet18 mobilenet mobilenet]. At most
// MaxMembers members are allowed.
func ParseArch(spec string) (canonical string, members []string, err error) {
	if strings.TrimSpace(spec) == "" {
		return "", nil, fmt.Errorf("empty arch spec")
	}
	terms := strings.Split(spec, "+")
	canon := make([]string, 0, len(terms))
	for _, term := range terms {
		name, count, hasCount := strings.Cut(term, "*")
		name = strings.TrimSpace(name)
		if name == "" {
			return "", nil, fmt.Errorf("arch spec %q: empty arch name", spec)
		}
		if path, ok := TorchScriptPath(name); ok {
			if strings.TrimSpace(path) == "" {
				return "", nil, fmt.Errorf("arch spec %q: %q names no file", spec, name)
			}
		} else if !isArchName(name) {
			return "", nil, fmt.Errorf("arch spec %q: invalid arch name %q (use letters, digits, '.', '_', '-', or %q and a file)", spec, name, TorchScriptPrefix)
		}
		n := 1
		if hasCount {
			count = strings.TrimSpace(count)
			v, err := strconv.Atoi(count)
			if err != nil || v < 1 || count[0] == '+' {
				return "", nil, fmt.Errorf("arch spec %q: member count %q must be an integer ≥ 1", spec, count)
			}
			n = v
		}
		if n > MaxMembers-len(members) {
			return "", nil, fmt.Errorf("arch spec %q: more than %d members", spec, MaxMembers)
		}
		for range n {
			members = append(members, name)
		}
		if n > 1 {
			canon = append(canon, name+"*"+strconv.Itoa(n))
		} else {
			canon = append(canon, name)
		}
	}
	return strings.Join(canon, "+"), members, nil
}

// TorchScriptPrefix starts an arch name that is a TorchScript file, made in
// PyTorch by torch.jit.script(model).save(path): "torchscript:net.pt". The
// path may hold any character but '+' and '*' (the spec's separators); a
// relative one is relative to the experiment file's folder (Load). Arch
// names go to model.Zoo.Make as they are, so this is model.TorchScriptPrefix
// too: it is written out here because this package does not import package
// model (which needs libtorch); a test of package grid, which imports both,
// checks that they agree.
const TorchScriptPrefix = "torchscript:"

// TorchScriptPath returns the file of a "torchscript:" arch name, and
// whether arch is one.
func TorchScriptPath(arch string) (string, bool) {
	return strings.CutPrefix(arch, TorchScriptPrefix)
}

func isArchName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isBareByte(c) && c != '.' {
			return false
		}
	}
	return s != ""
}

// Grid expands a validated experiment into its runs: methods (file order)
// × settings × archs (model.archs order) × seeds (train.seeds order), the
// seed varying fastest. A method's settings are the combinations of its
// swept values (its parameter lists, then the lists of e.Sweeps), the last list varying fastest; a method that sweeps nothing
// has one. Index counts from 0 in that order. An arch spec that does not
// parse (which Validate reports) yields Arch = the spec as written and no
// Members; a method with more than MaxSettings settings (which Validate
// reports) yields no runs.
func Grid(exp *Experiment) []Run {
	var runs []Run
	for _, m := range exp.Methods {
		sets, _ := settings(exp, m)
		for _, set := range sets {
			rm := withParams(m, set)
			lbl := label(m.Name, set)
			for _, spec := range exp.Model.Archs {
				arch, members, err := ParseArch(spec)
				if err != nil {
					arch, members = spec, nil
				}
				for _, seed := range exp.Train.Seeds {
					runs = append(runs, Run{
						Index:   len(runs),
						Method:  rm,
						Setting: set,
						Label:   lbl,
						Arch:    arch,
						Members: members,
						Seed:    seed,
						Key:     RunKey(lbl, arch, seed),
					})
				}
			}
		}
	}
	return runs
}

// RunKey returns the Key of the run with the given label (the method name,
// and its setting when it has one) on the canonical arch spec with seed:
// "method=<label>/arch=<arch>/seed=<seed>".
func RunKey(label, arch string, seed int64) string {
	return "method=" + label + "/arch=" + arch + "/seed=" + strconv.FormatInt(seed, 10)
}

// Shard returns shard i (1-based) of n of runs: the runs whose Index
// modulo n (taken non-negative) is i-1, in order. The n shards partition the grid, and a run's shard
// depends only on its Index, so every machine of a sharded sweep computes
// the same split from the same file.
func Shard(runs []Run, i, n int) ([]Run, error) {
	if n < 1 {
		return nil, fmt.Errorf("shard count must be ≥ 1 (got %d)", n)
	}
	if i < 1 || i > n {
		return nil, fmt.Errorf("shard index must be in 1..%d (got %d)", n, i)
	}
	var out []Run
	for _, r := range runs {
		if ((r.Index%n)+n)%n == i-1 {
			out = append(out, r)
		}
	}
	return out, nil
}

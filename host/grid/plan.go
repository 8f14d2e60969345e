// Package grid runs an experiment's grid of runs: Prepare validates the
// experiment with its plugins' schemas into a Plan; Open starts a Session
// (the torch worker, the device and the data on it) for it; Run trains each
// unfinished run through package train, with the results folder's
// bookkeeping of results.Store, and Check is host check's work: the data
// loaded and checked, the parameters counted and everything a run needs
// tried without training. The host command (package cli) parses flags,
// calls these and prints.
package grid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/plugin"
	"github.com/optlab/optlab/host/train"
	"github.com/optlab/optlab/sdk/optim"
)

// Plugins says where and how a plan's plugins run.
type Plugins struct {
	// Dir is the plugin directory.
	Dir string
	// Output receives the plugins' output and log lines.
	Output io.Writer
	// Timeouts are the deadlines of the calls into the plugins (zero
	// fields: plugin.DefaultTimeouts).
	Timeouts plugin.Timeouts
	// InProcess, when set, lists the methods served inside this process
	// (host run --in-process) instead of as plugin processes.
	InProcess *optim.Registry
}

// Plan is a validated experiment, its grid of runs and what its plugins
// said about themselves.
type Plan struct {
	Exp  *experiment.Experiment
	Runs []experiment.Run
	// Params are each run's validated hyperparameters (defaults filled
	// in), by run label.
	Params map[string]map[string]any
	// Infos are the plugins' answers, by method name.
	Infos   map[string]optim.Info
	plugins Plugins
}

// Method is what a run's record says about its optimizer (without the
// optimizer itself, which a launched plugin provides).
func (p *Plan) Method(run experiment.Run) train.Optimizer {
	info, params := p.Infos[run.Method.Name], p.Params[run.Label]
	return train.Optimizer{Plugin: info.Name, Version: info.Version, Params: params,
		OwnsUpdate: info.OwnsUpdateWith(params), Info: &info}
}

// OwnsUpdate reports whether every run of the method named method applies
// its own update: its plugin declares optim.Features.OwnsUpdate, or
// Features.UpdateRule with an update rule other than "base" in each run's
// hyperparameters (SAM with update = "adamw"). Such runs use no base
// optimizer.
func (p *Plan) OwnsUpdate(method string) bool {
	info, ok := p.Infos[method]
	if !ok {
		return false
	}
	seen := false
	for _, run := range p.Runs {
		if run.Method.Name != method {
			continue
		}
		if !info.OwnsUpdateWith(p.Params[run.Label]) {
			return false
		}
		seen = true
	}
	return seen
}

// Launch starts the plugin of method m.
func (p *Plan) Launch(ctx context.Context, m experiment.Method) (*plugin.Client, error) {
	name := m.Plugin
	if name == "" {
		name = filepath.Base(m.Path)
	}
	spec := plugin.LaunchSpec{
		Name: name, Path: m.Path, Dir: p.plugins.Dir, Timeouts: p.plugins.Timeouts, Output: p.plugins.Output,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "optlab", Level: hclog.Warn, Output: p.plugins.Output}),
	}
	if e, ok := p.plugins.InProcess.Lookup(m.Plugin); ok && m.Path == "" {
		spec.InProcess = e.New
	}
	return plugin.Launch(ctx, spec)
}

// Load reads the experiment file at path with the --set overrides sets and
// validates it (Validate).
func Load(path string, sets ...string) (*experiment.Experiment, error) {
	exp, err := experiment.Load(path, sets...)
	if err != nil {
		return nil, err
	}
	if err := Validate(exp); err != nil {
		return nil, err
	}
	return exp, nil
}

// Validate validates a decoded experiment (experiment.Validate) against the
// host's built-in architectures.
func Validate(exp *experiment.Experiment) error {
	return experiment.Validate(exp, model.Builtin().Names())
}

// maxLaunches bounds how many plugins Prepare starts at once.
const maxLaunches = 8

// Prepare validates the experiment (Validate), expands its grid, starts
// every method's plugin once to learn its schema (plugin.Launch checks its
// protocol) and validates the hyperparameters against it: every value of a
// sweep, then each run's setting; and it refuses the base optimizer's keys
// that plugins applying their own update would ignore
// (experiment.ValidateOwnsUpdate). The plugins are started concurrently
// (up to maxLaunches at once), so plugins that do not start cost about one
// start deadline together, not one each.
//
// Every problem of these checks is reported in one pass, as one
// experiment.ErrorList sorted by line, so that a file with a wrong value
// and a wrong hyperparameter is fixed at once: the plugins are started
// and asked even when Validate found problems, but for the methods whose
// name, plugin or path it refuses (which could not be started, or told
// from another). exp may be validated already (grid.Load); validating it
// again changes nothing.
func Prepare(ctx context.Context, exp *experiment.Experiment, plugins Plugins) (*Plan, error) {
	if plugins.Output != nil {
		plugins.Output = &syncWriter{w: plugins.Output}
	}
	var list experiment.ErrorList
	skip := map[int]bool{}
	if err := Validate(exp); err != nil {
		if exp == nil {
			return nil, err
		}
		list = appendProblems(list, err)
		skip = unlaunchable(list)
	}
	p := &Plan{Exp: exp, Runs: experiment.Grid(exp), Params: map[string]map[string]any{}, Infos: map[string]optim.Info{}, plugins: plugins}
	infos, infoErrs := p.infos(ctx, skip)
	for i, m := range exp.Methods {
		if skip[i] {
			continue
		}
		info, err := infos[i], infoErrs[i]
		if err != nil {
			list = append(list, &experiment.Error{File: exp.File, Line: m.Line, Key: methodKey(i),
				Msg: fmt.Sprintf("method %q: %v", m.Name, err), Err: err})
			continue
		}
		if _, err := experiment.ValidateParams(m, info.Params); err != nil {
			list = appendProblems(list, err)
			continue
		}
		p.Infos[m.Name] = info
		if err := p.validateRuns(m, info); err != nil {
			list = appendProblems(list, err)
		}
	}
	owns := func(i int) bool { return !skip[i] && p.OwnsUpdate(exp.Methods[i].Name) }
	if err := experiment.ValidateOwnsUpdate(exp, owns); err != nil {
		list = appendProblems(list, err)
	}
	if len(list) > 0 {
		list.Sort()
		return nil, list
	}
	return p, nil
}

// methodKey is the key of method i's table in problems, "method[i]".
func methodKey(i int) string { return fmt.Sprintf("method[%d]", i) }

// appendProblems appends the problems of err (an experiment.ErrorList, or
// any other error as one problem without a line) to list.
func appendProblems(list experiment.ErrorList, err error) experiment.ErrorList {
	var l experiment.ErrorList
	if errors.As(err, &l) {
		return append(list, l...)
	}
	return append(list, &experiment.Error{Msg: err.Error(), Err: err})
}

// unlaunchable returns the indices of the methods whose plugin Prepare
// cannot start because Validate refused their name, plugin or path (the
// problems in list whose Key is one of them, or the method's table).
func unlaunchable(list experiment.ErrorList) map[int]bool {
	out := map[int]bool{}
	for _, e := range list {
		rest, ok := strings.CutPrefix(e.Key, "method[")
		if !ok {
			continue
		}
		n, field, ok := strings.Cut(rest, "]")
		i, err := strconv.Atoi(n)
		if !ok || err != nil {
			continue
		}
		switch field {
		case "", ".name", ".plugin", ".path":
			out[i] = true
		}
	}
	return out
}

// infos launches the plugin of each method of the experiment but those of
// skip for its Info (info), up to maxLaunches at once, and returns the
// answers and errors by method index. Methods of the same plugin (the same
// plugin name and path) share one launch: its Info does not depend on a
// method's hyperparameters, and a plugin that does not start costs one
// start deadline, however many methods name it.
func (p *Plan) infos(ctx context.Context, skip map[int]bool) ([]optim.Info, []error) {
	methods := p.Exp.Methods
	infos := make([]optim.Info, len(methods))
	errs := make([]error, len(methods))
	slots := make(chan struct{}, maxLaunches)
	type pluginKey struct{ plugin, path string }
	first := map[pluginKey]int{}
	same := map[int]int{} // method index → the index of the first method of its plugin
	var wg sync.WaitGroup
	for i, m := range methods {
		if skip[i] {
			continue
		}
		k := pluginKey{m.Plugin, m.Path}
		if j, ok := first[k]; ok {
			same[i] = j
			continue
		}
		first[k] = i
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			infos[i], errs[i] = p.info(ctx, m)
		})
	}
	wg.Wait()
	for i, j := range same {
		infos[i], errs[i] = infos[j], errs[j]
	}
	return infos, errs
}

// syncWriter serialises the writes of the plugins started at once (and
// of their loggers) to one writer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write implements io.Writer.
func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// info launches method m's plugin for its Info and checks that it can
// train the experiment's members.
func (p *Plan) info(ctx context.Context, m experiment.Method) (optim.Info, error) {
	c, err := p.Launch(ctx, m)
	if err != nil {
		return optim.Info{}, err
	}
	info := c.AsOptimizer().Info()
	_ = c.Close() // the answer is in; how the plugin exits does not matter
	return info, checkMembers(p.Exp, info)
}

// validateRuns validates the hyperparameters of each of method m's
// settings (its first run's) within the run's bounds, and records them.
func (p *Plan) validateRuns(m experiment.Method, info optim.Info) error {
	for _, run := range p.Runs {
		if _, done := p.Params[run.Label]; done || run.Method.Name != m.Name {
			continue
		}
		params, err := experiment.ValidateParamsIn(run.Method, info.Params, experiment.RunBounds(run.Experiment(p.Exp)))
		if err != nil {
			return err
		}
		p.Params[run.Label] = params
	}
	return nil
}

// checkMembers refuses an optimizer that trains member 0 only (it does not
// declare optim.Features.Members) for an experiment with several members, which
// would otherwise train one model and evaluate the others untrained.
func checkMembers(exp *experiment.Experiment, info optim.Info) error {
	if info.Features.Members {
		return nil
	}
	for _, spec := range exp.Model.Archs {
		if _, members, err := experiment.ParseArch(spec); err == nil && len(members) > 1 {
			return fmt.Errorf("plugin %s trains one member (its Info lacks the %q feature), but archs entry %q has %d members",
				info.Name, "members", spec, len(members))
		}
	}
	return nil
}

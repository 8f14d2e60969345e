package optim

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// TraceEnv is the environment variable that turns tracing on in a plugin
// process: OPTLAB_TRACE=1 makes sdk/serve wrap the host with Trace, writing
// to the plugin's stderr (which the host passes on to its own).
const TraceEnv = "OPTLAB_TRACE"

// Trace returns a Host that passes every call on to h and writes it to w:
// each Exec as its number, the program's listing (Program.String), the
// values it read back by register and, with timing set, how long it took; or
// the error it failed with. It decorates any Host, the way Vault's and
// terraform's protocol tracing wrap theirs; golden op-trace tests use it
// without timing.
func Trace(h Host, w io.Writer, timing bool) Host {
	return &tracer{h: h, w: w, timing: timing}
}

type tracer struct {
	h      Host
	w      io.Writer
	timing bool

	mu sync.Mutex
	n  int
}

// Layout implements Host.
func (t *tracer) Layout(ctx context.Context) (Layout, error) {
	l, err := t.h.Layout(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		fmt.Fprintf(t.w, "layout: error: %v\n", err)
		return l, err
	}
	fmt.Fprintf(t.w, "layout: %d member(s)", len(l.Members))
	for _, m := range l.Members {
		fmt.Fprintf(t.w, " [%s: %d parameters in %d tensors]", m.Arch, m.Numel, len(m.Tensors))
	}
	fmt.Fprintln(t.w)
	return l, nil
}

// Exec implements Host.
func (t *tracer) Exec(ctx context.Context, p *Program) (Result, error) {
	start := time.Now()
	r, err := t.h.Exec(ctx, p)
	took := time.Since(start)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n++
	var b strings.Builder
	ops := 0
	if p != nil {
		ops = len(p.Ops)
	}
	fmt.Fprintf(&b, "exec %d: %d ops", t.n, ops)
	if t.timing {
		fmt.Fprintf(&b, ", %v", took.Round(time.Microsecond))
	}
	b.WriteByte('\n')
	b.WriteString(p.String())
	if err != nil {
		fmt.Fprintf(&b, "   error: %v\n", err)
	} else if len(r.Reads) > 0 {
		b.WriteString("   ←")
		var regs []Reg // the registers read, in op order
		if r.Program != nil {
			for _, op := range r.Program.Ops {
				if rd, ok := op.(Read); ok {
					regs = append(regs, rd.X)
				}
			}
		}
		for i, s := range r.Reads {
			reg := "#?"
			if i < len(regs) {
				reg = regs[i].String()
			}
			fmt.Fprintf(&b, " %s=%s", reg, num(s))
		}
		b.WriteByte('\n')
	}
	_, _ = io.WriteString(t.w, b.String())
	return r, err
}

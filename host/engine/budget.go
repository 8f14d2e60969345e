package engine

import (
	"errors"
	"fmt"
	"sync"

	"github.com/optlab/optlab/host/internal/sysmem"
	"github.com/optlab/optlab/sdk/optim"
)

// ErrOverBudget is wrapped by every refusal of a Budget: a plugin asked the
// host to hold more memory than a plugin may make it hold.
var ErrOverBudget = errors.New("over the host memory a plugin may use")

// Budget is the one bound on the host memory that a plugin can make the
// host hold: its vectors in host memory (on the CPU, or spilled from a
// device), its programs as they are received and decoded, and any other
// allocation a plugin's ops make (a new kind calls Hold with its byte size
// and Release when it frees it). It is derived from the memory the process
// may use (host/internal/sysmem: MemAvailable and every cgroup v1 or v2
// limit): HostBudget takes budgetShare of what is available when the run
// starts, leaving the rest for the forward and backward passes, the
// evaluation and the plugin's own process. A request beyond it is refused
// with an error wrapping ErrOverBudget that says what was asked, what is
// held and where the limit comes from: the op fails, so the run fails and
// is recorded, and the host goes on with the next run (instead of growing
// until the kernel's OOM killer ends it).
//
// A Budget is safe for concurrent use: programs are checked on gRPC
// goroutines while the engine's worker holds vectors.
type Budget struct {
	mu    sync.Mutex
	limit int64
	held  int64
	n     int    // allocations held
	from  string // where limit comes from, for messages
}

// budgetShare is the share of the memory available at a run's start that
// its plugin may make the host hold.
const budgetShare = 0.75

// NewBudget returns a budget of limit bytes; from says where the limit
// comes from, for messages. A limit ≤ 0 refuses everything.
func NewBudget(limit int64, from string) *Budget { return &Budget{limit: limit, from: from} }

// HostBudget returns the budget of a run that starts now: budgetShare of
// the memory this process may still allocate.
func HostBudget() *Budget {
	m := sysmem.Read()
	limit := int64(min(float64(m.Available)*budgetShare, 1<<62))
	return NewBudget(limit, fmt.Sprintf("%.0f%% of the %s available when the run started (%s)",
		budgetShare*100, sysmem.Format(m.Available), m.Source))
}

// Limit returns the budget's limit in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// Held returns the bytes held.
func (b *Budget) Held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// Hold accounts bytes more for what (e.g. "vector 5 (1000 parameters)"),
// or refuses them when they would pass the limit.
func (b *Budget) Hold(what string, bytes int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.check(what, bytes); err != nil {
		return err
	}
	b.held += bytes
	b.n++
	return nil
}

// Release gives back bytes held by one allocation.
func (b *Budget) Release(bytes int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held -= bytes
	b.n--
}

// Fits checks that bytes more for what (held only while it is used, such
// as a program being decoded) fit beside what is held.
func (b *Budget) Fits(what string, bytes int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.check(what, bytes)
}

func (b *Budget) check(what string, bytes int64) error {
	if bytes >= 0 && b.held+bytes <= b.limit && b.held+bytes >= b.held {
		return nil
	}
	return fmt.Errorf("%s needs %s, which would make the host hold %s for this plugin, %w: %s (%s; %d allocations hold %s now); free what the plugin no longer needs, or use fewer vectors or a smaller model",
		what, mib(bytes), mib(b.held+bytes), ErrOverBudget, mib(b.limit), b.from, b.n, mib(b.held))
}

// Decoded bytes of a program, estimated from its wire form: each op is held
// as a protobuf message, an oneof wrapper, an optim.Op and checker state
// (about 175 bytes measured), and repeated fields inside ops (LinComb's
// terms) grow by a few times their wire size.
const (
	opDecodedBytes   = 256
	wireDecodedRatio = 8
)

// CheckProgram bounds a program before it is decoded (sdk/protocol calls
// it with the op count and size of a received Exec's wire form): at most
// optim.MaxProgramOps ops, and its decoded size must fit the budget.
func (e *Engine) CheckProgram(ops, wireBytes int) error {
	if ops > optim.MaxProgramOps {
		return fmt.Errorf("program of %d ops (%s on the wire) refused: a program may hold at most %d ops; send the work in several Execs",
			ops, mib(int64(wireBytes)), optim.MaxProgramOps)
	}
	est := int64(ops)*opDecodedBytes + int64(wireBytes)*wireDecodedRatio
	return e.budget.Fits(fmt.Sprintf("program of %d ops (%s on the wire)", ops, mib(int64(wireBytes))), est)
}

// Budget returns the engine's host memory budget for its plugin.
func (e *Engine) Budget() *Budget { return e.budget }

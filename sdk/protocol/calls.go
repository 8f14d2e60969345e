package protocol

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/optlab/optlab/sdk/internal/wire"
)

// ErrStrayExec is wrapped by the refusal of an Exec that belongs to none
// of the host's calls into the plugin in flight (Conn.Refused).
var ErrStrayExec = errors.New("Exec outside the host's calls into the plugin")

// callIDMinor is the protocol minor from which a plugin sends each Exec
// with the id of the host's call it serves (wire.CallIDKey).
const callIDMinor = 11

// calls are the host's calls into one plugin in flight, by the id each
// carries (wire.CallIDKey), and the first Exec refused for belonging to
// none of them. The plugin's Execs are served only within one of them
// (docs/PROTOCOL.md §3): a thread or goroutine the plugin left running
// after its Step returned must not change the parameters while the host
// evaluates or saves them.
type calls struct {
	mu      sync.Mutex
	last    uint64            // the id of the latest call begun
	open    map[uint64]string // method by id
	refused error
}

// begin registers a call of method and returns ctx carrying its id for
// the outgoing call, and the function that ends it (once the plugin's
// reply has come).
func (cs *calls) begin(ctx context.Context, method string) (context.Context, func()) {
	cs.mu.Lock()
	cs.last++
	id := cs.last
	if cs.open == nil {
		cs.open = make(map[uint64]string)
	}
	cs.open[id] = method
	cs.mu.Unlock()
	return wire.WithOutgoingCall(ctx, id), func() {
		cs.mu.Lock()
		delete(cs.open, id)
		cs.mu.Unlock()
	}
}

// admit returns nil when an Exec that the plugin sent with ctx (whose
// request declares protocol minor) belongs to a call in flight, else the
// refusal, which is also kept for Refused. A plugin of minor 11 or later
// names its call; an older one sends no id, and its Exec is admitted while
// any call is in flight.
func (cs *calls) admit(ctx context.Context, minor int32) error {
	id, named := wire.IncomingCall(ctx)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var why string
	switch {
	case named && id > 0 && id <= cs.last:
		if _, ok := cs.open[id]; ok {
			return nil
		}
		why = fmt.Sprintf("it belongs to the host's call %d, which had returned (sent from a thread or goroutine that outlived the call, or with its context kept)", id)
	case named:
		why = fmt.Sprintf("its call id %q names none of the host's calls", metadataValue(ctx))
	case minor >= callIDMinor:
		why = "it carries no call id: it was sent from a thread or goroutine that is not serving one of the host's calls (one the optimizer started; in Go, an Exec whose ctx does not derive from the call's)"
	case len(cs.open) > 0:
		return nil // a plugin older than call ids, within a call
	default:
		why = "it came while none of the host's calls into the plugin was in flight (after its Step or Finalize returned, say, from a thread it left running)"
	}
	err := fmt.Errorf("%w: refused, %s; a plugin's Execs must come from within the host's call that they serve (docs/PROTOCOL.md §3)", ErrStrayExec, why)
	if cs.refused == nil {
		cs.refused = err
	}
	return &wire.Error{Code: codes.FailedPrecondition, Msg: err.Error()}
}

// metadataValue is the raw call id ctx carried, at most 40 bytes, for
// messages.
func metadataValue(ctx context.Context) string {
	vs := metadata.ValueFromIncomingContext(ctx, wire.CallIDKey)
	if len(vs) == 0 {
		return ""
	}
	return vs[0][:min(len(vs[0]), 40)]
}

// err returns the first refusal, or nil.
func (cs *calls) err() error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.refused
}

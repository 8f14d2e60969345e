package wire

import (
	"fmt"
	"runtime/debug"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
)

// Guard runs fn, the handler of a call of one side of the protocol
// ("optimizer" in a plugin, "host" in the host), and turns a panic into an
// Internal error, "panic in Step: …" ("host panic in Exec: …" on the host's
// side), logging the panic with its stack, instead of a crash of the
// process from a gRPC goroutine.
func Guard(log hclog.Logger, side, method string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("recovered panic in "+side, "method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			prefix := "panic in "
			if side == "host" {
				prefix = "host panic in "
			}
			err = &Error{Code: codes.Internal, Msg: fmt.Sprintf("%s%s: %v", prefix, method, r)}
		}
	}()
	return fn()
}

package plugin

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	goplugin "github.com/hashicorp/go-plugin"
)

// CleanupAll stops every plugin process that this process launched and
// waits for them to exit (go-plugin's managed clients, each killed after a
// 2 s grace period). The host's main must defer it; it may also be called
// from a signal handler (CleanupOnSignal does), and more than once.
func CleanupAll() { goplugin.CleanupClients() }

// CleanupOnSignal returns a copy of ctx that is cancelled when the process
// gets SIGINT (Ctrl-C) or SIGTERM; the signal also stops every plugin
// (CleanupAll). Plugins ignore SIGINT themselves, so this is what stops them
// on Ctrl-C. After the first signal the default handling is restored, so a
// second Ctrl-C ends the host at once. Calling stop releases the handler
// and cancels the returned context.
func CleanupOnSignal(ctx context.Context) (_ context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			signal.Stop(sigs)
			cancel(fmt.Errorf("interrupted by %v", sig))
			CleanupAll()
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			cancel(context.Canceled)
		})
	}
}

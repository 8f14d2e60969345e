package protocoltest_test

import (
	"testing"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
	"github.com/optlab/optlab/sdk/protocoltest"
)

// FakeHost, the host of the protocol tests, passes the conformance suite:
// recording programs changes nothing of what they do.
func TestFakeHostConformance(t *testing.T) {
	optimtest.TestHost(t, func(*testing.T) optim.Host { return protocoltest.NewFakeHost(1000) },
		optimtest.HostTestOptions{BaseSGD: true})
}

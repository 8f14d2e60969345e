// Command dst serves the dst optimizer (the DST ensemble of Liu et al.,
// 2022: independent members, each with dynamic sparse training) as an
// optlab plugin.
package main

import (
	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/sdk/serve"
)

func main() { serve.Serve(builtin.Constructor("dst")) }

package model

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/internal/torchtwin"
)

// scriptFixtures is a Python program that saves the TorchScript modules of
// TestTorchScriptRefusals and TestTorchScriptLayout into the folder argv[1].
const scriptFixtures = `
import sys, torch, torch.nn as nn
out = sys.argv[1]

class Net(nn.Module):
    def __init__(self, classes=10, bn_momentum=0.1):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4, momentum=bn_momentum)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(4 * 8 * 8, classes))
        self.register_buffer("scale", torch.tensor([2.0]))
    def forward(self, x):
        return self.head(torch.relu(self.bn(self.conv(x)))) * self.scale

class Pair(Net):
    def forward(self, x):
        y = self.head(self.conv(x))
        return y, y

torch.jit.script(Net()).save(out + "/net.pt")
torch.jit.script(Net().double()).save(out + "/double.pt")
torch.jit.script(Pair()).save(out + "/pair.pt")
torch.jit.script(Net(classes=5)).save(out + "/five.pt")
torch.jit.script(Net(bn_momentum=None)).save(out + "/cumulative.pt")
torch.jit.script(torch.jit.freeze(torch.jit.script(Net()).eval())).save(out + "/frozen.pt")

class Wide(nn.Module):  # [N, 2C] logits in train mode only
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 10)
        self.aux = nn.Linear(64, 10)
    def forward(self, x):
        x = x.flatten(1)
        y = self.fc(x)
        if self.training:
            y = torch.cat([y, self.aux(x)], 1)
        return y

class Narrow(nn.Module):  # [N, C/2] logits for batches over 2
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 10)
    def forward(self, x):
        y = self.fc(x.flatten(1))
        if x.size(0) > 2:
            y = y[:, :5]
        return y

class FromFile(nn.Module):  # writes a file: refused before it runs
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 10)
    def forward(self, x):
        t = torch.from_file("/nonexistent/victim", shared=True, size=8, dtype=torch.uint8)
        return self.fc(x.flatten(1)) + t.float().sum() * 0

class Emb(nn.Module):  # for torchscript_init = "reset"
    def __init__(self):
        super().__init__()
        self.pos_embed = nn.Parameter(torch.zeros(1, 4))
        self.emb = nn.Embedding(3, 4)
        self.body = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.Flatten())
        self.fc = nn.Linear(128, 10)
        self.ln = nn.LayerNorm(10)
    def forward(self, x):
        return self.ln(self.fc(self.body(x))) + (self.pos_embed.sum() + self.emb.weight.sum()) * 0

frozen = Net()
for p in frozen.conv.parameters():
    p.requires_grad_(False)
torch.jit.script(frozen).save(out + "/backbone.pt")
torch.jit.script(Wide()).save(out + "/wide.pt")
torch.jit.script(Narrow()).save(out + "/narrow.pt")
torch.jit.script(FromFile()).save(out + "/fromfile.pt")
torch.jit.script(Emb()).save(out + "/emb.pt")
open(out + "/garbage.pt", "w").write("not a TorchScript archive")
`

func writeScriptFixtures(t *testing.T) string {
	t.Helper()
	torchtwin.Script(t) // skips without PyTorch
	dir := t.TempDir()
	// torch.jit.script reads the classes' source: a file, not python -c.
	prog := filepath.Join(dir, "fixtures.py")
	if err := os.WriteFile(prog, []byte(scriptFixtures), 0o644); err != nil {
		t.Fatal(err)
	}
	torchtwin.Exec(t, prog, dir)
	return dir
}

func makeOnWorker(t *testing.T, arch string, classes int) (*Model, error) {
	t.Helper()
	w := tensor.NewWorker(1)
	t.Cleanup(w.Close)
	m, err := Builtin().Make(context.Background(), w, tensor.CPU, arch, classes, []int64{1, 8, 8})
	if m != nil {
		t.Cleanup(func() { _ = w.Do(context.Background(), func() error { m.Release(); return nil }) })
	}
	return m, err
}

// A TorchScript module's layout is its named_parameters (names, shapes,
// order) and its BatchNorm running statistics; other buffers stay in the
// module.
func TestTorchScriptLayout(t *testing.T) {
	dir := writeScriptFixtures(t)
	m, err := makeOnWorker(t, TorchScriptPrefix+filepath.Join(dir, "net.pt"), 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range m.Params {
		got = append(got, p.Name+":"+p.Kind)
	}
	want := "conv.weight:weight conv.bias:bias bn.weight:bn bn.bias:bn head.1.weight:weight head.1.bias:bias"
	if strings.Join(got, " ") != want {
		t.Errorf("parameters %v, want %s", got, want)
	}
	if m.Numel != 4*9+4+4+4+10*256+10 {
		t.Errorf("numel %d", m.Numel)
	}
	var bufs []string
	for _, b := range m.Buffers {
		bufs = append(bufs, b.Name)
	}
	if strings.Join(bufs, " ") != "bn.running_mean bn.running_var" {
		t.Errorf("buffers %v", bufs)
	}
	if !m.IsTorchScript() || m.Arch != TorchScriptPrefix+filepath.Join(dir, "net.pt") {
		t.Errorf("arch %q", m.Arch)
	}
	if err := m.SetNumerics(Numerics{ChannelsLast: true}); err == nil || !strings.Contains(err.Error(), "channels_last") {
		t.Errorf("channels_last: %v", err)
	}
}

// Modules optlab cannot train are refused when they are loaded, each with
// a message that says why.
func TestTorchScriptRefusals(t *testing.T) {
	dir := writeScriptFixtures(t)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.pt"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file    string
		classes int
		want    string
	}{
		{"missing.pt", 10, "no such file"},
		{"garbage.pt", 10, "loading TorchScript module"},
		{"double.pt", 10, "conv.weight is Double; optlab trains float32 parameters"},
		{"pair.pt", 10, "returns one tensor of logits"},
		{"five.pt", 10, "returns logits of shape [2 5] for a batch of 2 in eval mode; the data has 10 classes, so optlab needs [2 10]"},
		{"wide.pt", 10, "returns logits of shape [3 20] for a batch of 3 in train mode"},
		{"narrow.pt", 10, "returns logits of shape [3 5] for a batch of 3 in train mode"},
		{"backbone.pt", 10, "parameters conv.weight, conv.bias were saved with requires_grad=False (frozen)"},
		{"fromfile.pt", 10, "its code calls torch.from_file"},
		{"fifo.pt", 10, "named pipe (FIFO), not a regular file"},
		{"cumulative.pt", 10, "BatchNorm bn has momentum None"},
		{"frozen.pt", 10, "has no parameters (a frozen module?"},
	} {
		t.Run(c.file, func(t *testing.T) {
			_, err := makeOnWorker(t, TorchScriptPrefix+filepath.Join(dir, c.file), c.classes)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
			if first := strings.SplitN(err.Error(), "\n", 2)[0]; !strings.Contains(first, c.file) {
				t.Errorf("the message's first line does not name the file: %q", first)
			}
		})
	}
}

// torchscript_init = "reset" redraws only torch.nn's Linear and Conv
// weights and their biases (and sets BatchNorm's): an embedding, a
// position embedding and a LayerNorm keep the file's values, as
// docs/EXPERIMENTS.md says (hardening4/19).
func TestTorchScriptResetKinds(t *testing.T) {
	dir := writeScriptFixtures(t)
	m, err := makeOnWorker(t, TorchScriptPrefix+filepath.Join(dir, "emb.pt"), 10)
	if err != nil {
		t.Fatal(err)
	}
	m.ResetInit()
	want := map[string]InitKind{
		"pos_embed": Given, "emb.weight": Given, "ln.weight": Given, "ln.bias": Given,
		"body.0.weight": TorchDefault, "body.0.bias": TorchDefault, "fc.weight": TorchDefault, "fc.bias": TorchDefault,
	}
	for _, p := range m.Params {
		if w, ok := want[p.Name]; !ok || p.Init.Kind != w {
			t.Errorf("%s: init %v, want %v", p.Name, p.Init.Kind, w)
		}
	}
}

// A module's buffers that are not BatchNorm running statistics stay in the
// module and are listed for the training state (hardening4/11).
func TestTorchScriptModuleBuffers(t *testing.T) {
	dir := writeScriptFixtures(t)
	w := tensor.NewWorker(1)
	defer w.Close()
	var names []string
	m, err := Builtin().Make(context.Background(), w, tensor.CPU, TorchScriptPrefix+filepath.Join(dir, "net.pt"), 10, []int64{1, 8, 8})
	if err != nil {
		t.Fatal(err)
	}
	err = w.Do(context.Background(), func() error {
		defer m.Release()
		s := tensor.NewScope()
		defer s.Close()
		names, _ = m.ModuleBuffers(s)
		return s.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"bn.num_batches_tracked", "scale"}) {
		t.Errorf("module buffers %v, want bn.num_batches_tracked and scale", names)
	}
}

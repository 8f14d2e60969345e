package model

import (
	"fmt"
	"testing"
)

func TestParamCounts(t *testing.T) {
	cases := []struct {
		arch    string
		classes int
		want    int64
	}{
		{"resnet18", 10, 11_173_962},
		{"resnet10", 10, 4_903_242},
		{"wrn28-10", 10, 36_479_194},
		{"wrn28-10-ref", 10, 46_160_474},
		{"wrn28-10-ref", 100, 46_218_164},
		// dyhan's PyramidNet (OT-MDR model/pyramidNet.py), PyramidNet(
		// 'cifar10', 101, 64, classes, bottleneck=True), counted in Python.
		{"pyramidnet101", 10, 1_557_518},
		{"pyramidnet101", 100, 1_586_408},
		// kuangliu/pytorch-cifar models/densenet.py DenseNet121 (≈6.96M).
		{"densenet121", 10, 6_956_298},
		{"densenet121", 100, 7_048_548},
		// kuangliu/pytorch-cifar models/mobilenetv2.py MobileNetV2 (≈2.30M).
		{"mobilenet", 10, 2_296_922},
		{"mobilenet", 100, 2_412_212},
		// kuangliu/pytorch-cifar models/efficientnet.py EfficientNetB0
		// (3,599,686 / 3,628,576) less its unused layers.0.conv1 and
		// layers.0.bn1 (1,088 parameters).
		{"efficientnet-b0", 10, 3_598_598},
		{"efficientnet-b0", 100, 3_627_488},
	}
	zoo := Builtin()
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%d", c.arch, c.classes), func(t *testing.T) {
			m, err := zoo.New(c.arch, c.classes, []int64{3, 32, 32})
			if err != nil {
				t.Fatal(err)
			}
			if m.Numel != c.want {
				t.Errorf("%s/%d: %d parameters, want %d", c.arch, c.classes, m.Numel, c.want)
			}
		})
	}
}

// TestParamCounts28 pins the parameter counts on 1×28×28 input (MNIST,
// Fashion-MNIST): the CIFAR variants with their first layer taking one
// channel, i.e. the 3-channel counts less 2·k²·(first conv's channels), and
// the MLP's first layer on 784 inputs (784·256+256 + 256·256+256 + 256·10+10).
func TestParamCounts28(t *testing.T) {
	want := map[string]int64{
		"mlp":             269_322,
		"cnn":             94_186,
		"cnn-small":       24_058,
		"lenet5":          61_706,
		"resnet10":        4_903_242 - 2*9*64,
		"resnet18":        11_173_962 - 2*9*64,
		"wrn28-10":        36_479_194 - 2*9*16,
		"wrn28-10-ref":    46_160_474 - 2*9*16,
		"pyramidnet101":   1_557_518 - 2*9*16,
		"densenet121":     6_956_298 - 2*9*64,
		"mobilenet":       2_296_922 - 2*9*32,
		"efficientnet-b0": 3_598_598 - 2*9*32,
	}
	zoo := Builtin()
	if len(want) != len(zoo.Names()) {
		t.Fatalf("%d architectures pinned, the zoo has %d", len(want), len(zoo.Names()))
	}
	for arch, n := range want {
		m, err := zoo.New(arch, 10, []int64{1, 28, 28})
		if err != nil {
			t.Fatal(err)
		}
		if m.Numel != n {
			t.Errorf("%s on 1×28×28: %d parameters, want %d", arch, m.Numel, n)
		}
	}
}

package experiment

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		body string   // placed from line 2 of a file with a name and one method
		want []string // substrings of the error; empty means valid
	}{
		{name: "defaults"},
		{name: "batch size", body: "[train]\nbatch_size = -1", want: []string{"t.toml:3: train.batch_size must be > 0 (got -1)"}},
		{name: "epochs zero", body: "[train]\nepochs = 0", want: []string{"t.toml:3: train.epochs must be > 0 (got 0)"}},
		{name: "bad dataset enum", body: "[data]\ndataset = \"cifar-10\"", want: []string{
			`t.toml:3: data.dataset must be one of uci-digits, cifar10, cifar100, fashion-mnist, mnist, csv, npz, synthetic (got "cifar-10"); did you mean "cifar10"?`}},
		{name: "cifar needs dir", body: "[data]\ndataset = \"cifar10\"", want: []string{"t.toml:3: data.dir is required for dataset \"cifar10\""}},
		{name: "cifar ok", body: "[data]\ndataset = \"cifar100\"\ndir = \"data/c\"\nood = \"cifar10\"\nood_dir = \"data/c10\""},
		{name: "dir not for digits", body: "[data]\ndir = \"x\"", want: []string{"t.toml:3: data.dir applies only to datasets cifar10, cifar100, fashion-mnist and mnist"}},
		{name: "dir for fashion-mnist", body: "[data]\ndataset = \"fashion-mnist\"", want: []string{"data.dir is required for dataset \"fashion-mnist\""}},
		{name: "ood mnist needs 28x28", body: "[data]\ndataset = \"cifar10\"\ndir = \"d\"\nood = \"mnist\"\nood_dir = \"m\"", want: []string{"data.ood needs 1×28×28 inputs for ood \"mnist\": dataset fashion-mnist or mnist (dataset is \"cifar10\")"}},
		{name: "ood cifar needs 32x32", body: "[data]\ndataset = \"mnist\"\ndir = \"d\"\nood = \"cifar10\"\nood_dir = \"c\"", want: []string{"data.ood needs 3×32×32 inputs"}},
		{name: "default-valued inapplicable keys are fine", body: "[data]\ndir = \"\"\npath = \"\"\nclasses = 0\n[train.optimizer]\nbetas = [0.9, 0.999]\n[train.schedule]\nmilestones = [0.3, 0.6, 0.8]"},
		{name: "csv needs path", body: "[data]\ndataset = \"csv\"", want: []string{"t.toml:3: data.path is required for dataset \"csv\""}},
		{name: "csv classes one", body: "[data]\ndataset = \"csv\"\npath = \"a.csv\"\nclasses = 1", want: []string{"t.toml:5: data.classes must be 0 (infer) or ≥ 2 (got 1)"}},
		{name: "csv no augment", body: "[data]\ndataset = \"csv\"\npath = \"a.csv\"\naugment = [\"flip\"]", want: []string{"t.toml:5: data.augment must be empty for vector inputs"}},
		{name: "npz needs path", body: "[data]\ndataset = \"npz\"", want: []string{"t.toml:3: data.path is required for dataset \"npz\""}},
		{name: "npz", body: "[data]\ndataset = \"npz\"\npath = \"d.npz\"\nlayout = \"nhwc\"\nclasses = 10\nvalidation = 0.1\naugment = [\"crop\"]\n[model]\nmemory_format = \"channels_last\""},
		{name: "npz classes one", body: "[data]\ndataset = \"npz\"\npath = \"d\"\nclasses = 1", want: []string{"t.toml:5: data.classes must be 0 (infer) or ≥ 2 (got 1)"}},
		{name: "npz layout", body: "[data]\ndataset = \"npz\"\npath = \"d\"\nlayout = \"NHWC\"", want: []string{
			`t.toml:5: data.layout must be one of nchw, nhwc (got "NHWC"); did you mean "nhwc"?`}},
		{name: "layout only for npz", body: "[data]\ndataset = \"csv\"\npath = \"a.csv\"\nlayout = \"nhwc\"", want: []string{"t.toml:5: data.layout applies only to dataset npz"}},
		{name: "layout at its default", body: "[data]\nlayout = \"nchw\""},
		{name: "path only for csv and npz", body: "[data]\npath = \"a.csv\"", want: []string{"t.toml:3: data.path applies only to datasets csv and npz"}},
		{name: "test fraction not for npz", body: "[data]\ndataset = \"npz\"\npath = \"d\"\ntest_fraction = 0.5", want: []string{
			"t.toml:5: data.test_fraction applies only to datasets uci-digits and csv (CIFAR, the MNIST-format datasets and npz have a fixed test set"}},
		{name: "npz may hold its validation split", body: "[data]\ndataset = \"npz\"\npath = \"d\"\n[eval]\ntemperature = \"validation\"\nevery_epochs = 1\nbest_epoch = \"nll\"\n[eval.corruptions]\nfamilies = [\"all\"]"},
		{name: "npz no ood", body: "[data]\ndataset = \"npz\"\npath = \"d\"\nood = \"synthetic\"", want: []string{"t.toml:5: data.ood needs 3×32×32 inputs"}},
		{name: "label noise npz classes", body: "[data]\ndataset = \"npz\"\npath = \"d\"\nclasses = 3\n[data.label_noise]\nkind = \"asymmetric\"\nrate = 0.1\nmap = {0 = 3}", want: []string{
			`data.label_noise.map: class 0 maps to 3, out of range: dataset "npz" has 3 classes (0..2)`}},
		{name: "test fraction range", body: "[data]\ntest_fraction = 1.0", want: []string{"t.toml:3: data.test_fraction must be in (0, 1) (got 1)"}},
		{name: "test fraction not for cifar", body: "[data]\ndataset = \"cifar10\"\ndir = \"d\"\ntest_fraction = 0.5", want: []string{"t.toml:5: data.test_fraction applies only to datasets uci-digits and csv"}},
		{name: "validation nan", body: "[data]\nvalidation = nan", want: []string{"t.toml:3: data.validation must be in [0, 1) (got nan)"}},
		{name: "augment unknown", body: "[data]\naugment = [\"crop\", \"flipp\", \"crop\"]", want: []string{
			`t.toml:3: data.augment: unknown augmentation "flipp" (allowed: crop, flip); did you mean "flip"?`,
			`t.toml:3: data.augment lists "crop" twice`}},
		{name: "ood same as dataset", body: "[data]\ndataset = \"cifar10\"\ndir = \"d\"\nood = \"cifar10\"\nood_dir = \"d\"", want: []string{"t.toml:5: data.ood must differ from data.dataset"}},
		{name: "ood needs images", body: "[data]\nood = \"synthetic\"", want: []string{"t.toml:3: data.ood needs 3×32×32 inputs"}},
		{name: "ood unknown", body: "[data]\nood = \"svhn\"", want: []string{"t.toml:3: data.ood must be one of cifar10, cifar100, fashion-mnist, mnist, synthetic (got \"svhn\")"}},
		{name: "ood dir", body: "[data]\ndataset = \"synthetic\"\nood = \"cifar10\"", want: []string{"t.toml:4: data.ood_dir is required for ood \"cifar10\""}},
		{name: "synthetic", body: "[data]\ndataset = \"synthetic\"\n[data.synthetic]\ntrain = 0\nclasses = 1", want: []string{
			"t.toml:5: data.synthetic.train must be > 0 (got 0)", "t.toml:6: data.synthetic.classes must be ≥ 2 (got 1)"}},
		{name: "synthetic table not used", body: "[data.synthetic]\ntrain = 10", want: []string{"t.toml:2: data.synthetic applies only when data.dataset or data.ood is \"synthetic\""}},
		{name: "synthetic vectors no augment", body: "[data]\ndataset = \"synthetic\"\naugment = [\"crop\"]\n[data.synthetic]\nfeatures = 16", want: []string{"t.toml:4: data.augment must be empty for vector inputs"}},
		{name: "synthetic ood must be images", body: "[data]\ndataset = \"cifar10\"\ndir = \"d\"\nood = \"synthetic\"\n[data.synthetic]\nfeatures = 5", want: []string{"t.toml:7: data.synthetic.features must be 0 (images)"}},
		{name: "corruptions", body: "[data]\ndataset = \"fashion-mnist\"\ndir = \"d\"\nvalidation = 0.1\n[eval]\nevery_epochs = 1\nbest_epoch = \"nll\"\n[eval.corruptions]\nfamilies = [\"all\"]\nseed = 3"},
		{name: "corruptions families required", body: "[data]\ndataset = \"mnist\"\ndir = \"d\"\n[eval.corruptions]\nseed = 3", want: []string{
			"t.toml:5: eval.corruptions.families is required when [eval.corruptions] is written"}},
		{name: "corruptions unknown family", body: "[data]\ndataset = \"mnist\"\ndir = \"d\"\n[eval.corruptions]\nfamilies = [\"fog\"]", want: []string{
			`t.toml:6: eval.corruptions.families names an unknown corruption "fog" (the families are gaussian_noise, `}},
		{name: "corruptions severities", body: "[data]\ndataset = \"mnist\"\ndir = \"d\"\n[eval.corruptions]\nfamilies = [\"jpeg\"]\nseverities = [0, 2, 2]", want: []string{
			"t.toml:7: eval.corruptions.severities severity 0 is not in 1..5", "t.toml:7: eval.corruptions.severities lists severity 2 twice"}},
		{name: "corruptions families twice", body: "[data]\ndataset = \"mnist\"\ndir = \"d\"\n[eval.corruptions]\nfamilies = [\"jpeg\", \"jpeg\"]", want: []string{
			`t.toml:6: eval.corruptions.families lists "jpeg" twice`}},
		{name: "corruptions all and others", body: "[data]\ndataset = \"mnist\"\ndir = \"d\"\n[eval.corruptions]\nfamilies = [\"all\", \"jpeg\"]", want: []string{
			`t.toml:6: eval.corruptions.families lists "all" with other families`}},
		{name: "corruptions need images", body: "[eval.corruptions]\nfamilies = [\"jpeg\"]", want: []string{
			`eval.corruptions needs 8-bit images (cifar10, cifar100, fashion-mnist, mnist, or npz with uint8 images); dataset "uci-digits" is not`}},
		{name: "best epoch needs validation", body: "[eval]\nevery_epochs = 1\nbest_epoch = \"acc\"", want: []string{
			"t.toml:4: eval.best_epoch needs a validation split to choose on"}},
		{name: "best epoch needs evaluations", body: "[data]\nvalidation = 0.1\n[eval]\nbest_epoch = \"acc\"", want: []string{
			"t.toml:5: eval.best_epoch needs evaluations during training to choose among"}},
		{name: "best epoch criterion", body: "[data]\nvalidation = 0.1\n[eval]\nevery_epochs = 2\nbest_epoch = \"loss\"", want: []string{
			`t.toml:6: eval.best_epoch must be one of acc, nll (got "loss")`}},
		{name: "label noise symmetric", body: "[data.label_noise]\nkind = \"symmetric\"\nrate = 0.2\nseed = 7"},
		{name: "label noise pairflip rate 0", body: "[data.label_noise]\nkind = \"pairflip\"\nrate = 0"},
		{name: "label noise asymmetric cifar10", body: "[data]\ndataset = \"cifar10\"\ndir = \"d\"\n[data.label_noise]\nkind = \"asymmetric\"\nrate = 0.4\nmap = {9 = 1, 2 = 0, 3 = 5, 5 = 3, 4 = 7}"},
		{name: "label noise csv classes unknown", body: "[data]\ndataset = \"csv\"\npath = \"a.csv\"\n[data.label_noise]\nkind = \"asymmetric\"\nrate = 0.4\nmap = {12 = 1}"},
		{name: "label noise kind required", body: "[data.label_noise]\nrate = 0.2", want: []string{
			"t.toml:2: data.label_noise.kind is required when [data.label_noise] is written"}},
		{name: "label noise bad kind", body: "[data.label_noise]\nkind = \"pair-flip\"\nrate = 0.2", want: []string{
			`t.toml:3: data.label_noise.kind must be one of symmetric, pairflip, asymmetric (got "pair-flip"); did you mean "pairflip"?`}},
		{name: "label noise rate required", body: "[data.label_noise]\nkind = \"symmetric\"", want: []string{
			"t.toml:2: data.label_noise.rate is required with data.label_noise.kind"}},
		{name: "label noise rate one", body: "[data.label_noise]\nkind = \"symmetric\"\nrate = 1", want: []string{
			"t.toml:4: data.label_noise.rate must be in [0, 1) (got 1)"}},
		{name: "label noise rate negative", body: "[data.label_noise]\nkind = \"pairflip\"\nrate = -0.1", want: []string{
			"t.toml:4: data.label_noise.rate must be in [0, 1) (got -0.1)"}},
		{name: "label noise map not for symmetric", body: "[data.label_noise]\nkind = \"symmetric\"\nrate = 0.1\nmap = {1 = 2}", want: []string{
			`t.toml:5: data.label_noise.map applies only to kind "asymmetric" (kind is "symmetric")`}},
		{name: "label noise map required", body: "[data.label_noise]\nkind = \"asymmetric\"\nrate = 0.1", want: []string{
			`t.toml:2: data.label_noise.map is required for kind "asymmetric"`}},
		{name: "label noise bad map", body: "[data.label_noise]\nkind = \"asymmetric\"\nrate = 0.1\nmap = {1 = 1, 10 = 2, 3 = 10, 04 = 2, x = 1, 5 = -1}", want: []string{
			"data.label_noise.map: class 1 maps to itself",
			`data.label_noise.map: class 10 is out of range: dataset "uci-digits" has 10 classes (0..9)`,
			`data.label_noise.map: class 3 maps to 10, out of range: dataset "uci-digits" has 10 classes (0..9)`,
			`data.label_noise.map: class 5 maps to -1, out of range`,
			`data.label_noise.map: key "04" is not a class`,
			`data.label_noise.map: key "x" is not a class`}},
		{name: "label noise map multiline", body: "[data.label_noise]\nkind = \"asymmetric\"\nrate = 0.1\n[data.label_noise.map]\n2 = 0\n3 = 3", want: []string{
			"t.toml:7: data.label_noise.map: class 3 maps to itself"}},
		{name: "label noise synthetic classes", body: "[data]\ndataset = \"synthetic\"\n[data.synthetic]\nclasses = 3\n[data.label_noise]\nkind = \"asymmetric\"\nrate = 0.1\nmap = {0 = 3}", want: []string{
			`data.label_noise.map: class 0 maps to 3, out of range: dataset "synthetic" has 3 classes (0..2)`}},
		{name: "archs empty", body: "[model]\narchs = []", want: []string{"t.toml:3: model.archs must list at least one arch spec"}},
		{name: "arch unknown", body: "[model]\narchs = [\"resnet18+mobilnet\"]", want: []string{
			`t.toml:3: model.archs[0]: unknown arch "mobilnet"; did you mean "mobilenet"?`}},
		{name: "arch bad spec", body: "[model]\narchs = [\"cnn*0\"]", want: []string{`t.toml:3: model.archs[0]: arch spec "cnn*0": member count "0" must be an integer ≥ 1`}},
		{name: "arch duplicate after normalising", body: "[model]\narchs = [\n\"cnn*2\",\n\"cnn * 2\",\n]", want: []string{`t.toml:5: model.archs[1]: arch spec "cnn * 2" is the same as "cnn*2"`}},
		{name: "variational opts without variational", body: "[model.variational_opts]\nbeta = 0.5", want: []string{"t.toml:2: model.variational_opts applies only when model.variational = true"}},
		{name: "variational opts", body: "[model]\nvariational = true\n[model.variational_opts]\nkl = \"kl\"\nprior_sigma = 0.0\nmc_samples = 0", want: []string{
			`t.toml:5: model.variational_opts.kl must be one of qp, pq (got "kl")`,
			"t.toml:6: model.variational_opts.prior_sigma must be > 0 (got 0)",
			"t.toml:7: model.variational_opts.mc_samples must be > 0 (got 0)"}},
		{name: "seeds", body: "[train]\nseeds = [1, 2, 1, -3]", want: []string{"t.toml:3: train.seeds lists 1 twice", "t.toml:3: train.seeds[3] must be ≥ 0 (got -3)"}},
		{name: "seeds empty", body: "[train]\nseeds = []", want: []string{"t.toml:3: train.seeds must list at least one seed"}},
		{name: "device ok", body: "[train]\ndevice = \"cuda:12\""},
		{name: "device bad", body: "[train]\ndevice = \"cuda:01\"", want: []string{`t.toml:3: train.device must be auto, cpu, cuda or cuda:N with N ≥ 0 (got "cuda:01")`}},
		{name: "device gpu", body: "[train]\ndevice = \"gpu\"", want: []string{"train.device must be"}},
		{name: "precision bf16", body: "[train]\nprecision = \"bf16\""},
		{name: "precision fp32", body: "[train]\nprecision = \"fp32\""},
		{name: "precision fp16", body: "[train]\nprecision = \"fp16\"", want: []string{`t.toml:3: train.precision must be one of fp32, bf16 (got "fp16")`}},
		{name: "precision case", body: "[train]\nprecision = \"BF16\"", want: []string{`t.toml:3: train.precision must be one of fp32, bf16 (got "BF16"); did you mean "bf16"?`}},
		{name: "channels_last", body: "[model]\nmemory_format = \"channels_last\""},
		{name: "torchscript reset", body: "[model]\narchs = [\"torchscript:net.pt*3\"]\ntorchscript_init = \"reset\""},
		{name: "torchscript init unknown", body: "[model]\narchs = [\"torchscript:net.pt\"]\ntorchscript_init = \"random\"", want: []string{`t.toml:4: model.torchscript_init must be one of file, reset (got "random")`}},
		{name: "torchscript init without a torchscript arch", body: "[model]\narchs = [\"cnn\"]\ntorchscript_init = \"reset\"", want: []string{`t.toml:4: model.torchscript_init applies only when model.archs has a "torchscript:" arch`}},
		{name: "memory format unknown", body: "[model]\nmemory_format = \"nhwc\"", want: []string{`t.toml:3: model.memory_format must be one of contiguous, channels_last (got "nhwc")`}},
		{name: "channels_last needs images", body: "[data]\ndataset = \"csv\"\npath = \"a.csv\"\n[model]\nmemory_format = \"channels_last\"", want: []string{
			`t.toml:6: model.memory_format channels_last needs image inputs (dataset "csv" has flat feature vectors); use "contiguous"`}},
		{name: "label smoothing", body: "[train]\nlabel_smoothing = 1", want: []string{"t.toml:3: train.label_smoothing must be in [0, 1) (got 1)"}},
		{name: "threads", body: "[train]\nthreads = -2\nmax_steps = -1", want: []string{"t.toml:3: train.threads must be ≥ 0 (got -2)", "t.toml:4: train.max_steps must be ≥ 0 (got -1)"}},
		{name: "dump_params_every", body: "[train]\ndump_params_every = -1", want: []string{"t.toml:3: train.dump_params_every must be ≥ 0 (got -1)"}},
		{name: "deterministic without benchmarking", body: "[train]\ndeterministic = true\ncudnn_benchmark = true", want: []string{"t.toml:4: train.cudnn_benchmark must be false with train.deterministic = true"}},
		{name: "optimizer name", body: "[train.optimizer]\nname = \"adamw\"", want: []string{`t.toml:3: train.optimizer.name must be one of sgd, adam (got "adamw"); did you mean "adam"?`}},
		{name: "lr inf", body: "[train.optimizer]\nlr = inf", want: []string{"t.toml:3: train.optimizer.lr must be > 0 (got inf)"}},
		{name: "momentum", body: "[train.optimizer]\nmomentum = 1.0", want: []string{"t.toml:3: train.optimizer.momentum must be in [0, 1) (got 1)"}},
		{name: "nesterov needs momentum", body: "[train.optimizer]\nmomentum = 0.0\nnesterov = true", want: []string{"t.toml:4: train.optimizer.nesterov needs train.optimizer.momentum > 0"}},
		{name: "betas for sgd", body: "[train.optimizer]\nbetas = [0.5, 0.9]", want: []string{"t.toml:3: train.optimizer.betas applies only to optimizer adam"}},
		{name: "momentum for adam", body: "[train.optimizer]\nname = \"adam\"\nlr = 1e-3\nmomentum = 0.5", want: []string{"t.toml:5: train.optimizer.momentum applies only to optimizer sgd"}},
		{name: "adam betas", body: "[train.optimizer]\nname = \"adam\"\nbetas = [0.9, 1.5, 0.1]\neps = 0", want: []string{
			"t.toml:4: train.optimizer.betas must have 2 elements (got 3)",
			"t.toml:4: train.optimizer.betas[1] must be in [0, 1) (got 1.5)",
			"t.toml:5: train.optimizer.eps must be > 0 (got 0)"}},
		{name: "schedule kind", body: "[train.schedule]\nkind = \"cosin\"", want: []string{`t.toml:3: train.schedule.kind must be one of constant, step, cosine, plateau, cyclic (got "cosin"); did you mean "cosine"?`}},
		{name: "milestones for cosine", body: "[train.schedule]\nkind = \"cosine\"\nmilestones = [0.5]", want: []string{"t.toml:4: train.schedule.milestones applies only to schedule kind step"}},
		{name: "milestones fractions", body: "[train.schedule]\nkind = \"step\"\nmilestones = [0.5, 0.75]"},
		{name: "milestones epochs", body: "[train]\nepochs = 20\n[train.schedule]\nkind = \"step\"\nmilestones = [10, 15]"},
		{name: "milestones mixed", body: "[train.schedule]\nkind = \"step\"\nmilestones = [0.5, 8]", want: []string{"t.toml:4: train.schedule.milestones mixes fractions"}},
		{name: "milestones not increasing", body: "[train.schedule]\nkind = \"step\"\nmilestones = [0.5, 0.5]", want: []string{"t.toml:4: train.schedule.milestones must be strictly increasing (0.5 after 0.5)"}},
		{name: "milestones beyond epochs", body: "[train.schedule]\nkind = \"step\"\nmilestones = [5, 11]", want: []string{"t.toml:4: train.schedule.milestones[1] must be ≤ train.epochs = 10 (got 11)"}},
		{name: "milestones fractional epoch", body: "[train.schedule]\nkind = \"step\"\nmilestones = [2.5]", want: []string{"t.toml:4: train.schedule.milestones[0] must be a whole epoch number when ≥ 1 (got 2.5)"}},
		{name: "milestones empty", body: "[train.schedule]\nkind = \"step\"\nmilestones = []", want: []string{"t.toml:4: train.schedule.milestones must list at least one milestone"}},
		{name: "gamma", body: "[train.schedule]\nkind = \"step\"\ngamma = 0", want: []string{"t.toml:4: train.schedule.gamma must be in (0, 1] (got 0)"}},
		{name: "warmup", body: "[train.schedule]\nwarmup_epochs = 10", want: []string{"t.toml:3: train.schedule.warmup_epochs must be < train.epochs = 10 (got 10)"}},
		{name: "plateau", body: "[train.schedule]\nkind = \"plateau\"\npatience = 0\nfactor = 1\nmin_lr = 0.2", want: []string{
			"t.toml:4: train.schedule.patience must be > 0 (got 0)",
			"t.toml:5: train.schedule.factor must be in (0, 1) (got 1)",
			"t.toml:6: train.schedule.min_lr must be < train.optimizer.lr = 0.1 (got 0.2)"}},
		{name: "cyclic", body: "[train.schedule]\nkind = \"cyclic\"\ncycle_epochs = 11\nlr_max = 0.01\nlr_min = 0.01", want: []string{
			"t.toml:4: train.schedule.cycle_epochs must be ≤ train.epochs = 10 (got 11)",
			"t.toml:5: train.schedule.lr_max must be > train.schedule.lr_min = 0.01 (got 0.01)"}},
		{name: "cyclic keys with constant", body: "[train.schedule]\nlr_max = 0.5", want: []string{"t.toml:3: train.schedule.lr_max applies only to schedule kind cyclic"}},
		{name: "temperature needs validation", body: "[eval]\ntemperature = \"validation\"", want: []string{
			`t.toml:3: eval.temperature = "validation" needs data.validation > 0 (got 0)`}},
		{name: "temperature enum", body: "[eval]\ntemperature = \"test_halves\"", want: []string{`did you mean "test-halves"?`}},
		{name: "eval ranges", body: "[eval]\naac_steps = 1\nmc_samples = 0\nevery_epochs = -1", want: []string{
			"t.toml:3: eval.aac_steps must be ≥ 2 (got 1)", "t.toml:4: eval.mc_samples must be > 0 (got 0)", "t.toml:5: eval.every_epochs must be ≥ 0 (got -1)"}},
		{name: "tensorboard interval", body: "[eval]\ntensorboard_every_steps = -1", want: []string{
			"t.toml:3: eval.tensorboard_every_steps must be ≥ 0 (got -1)"}},
		{name: "tensorboard interval without tensorboard", body: "[eval]\ntensorboard = false\ntensorboard_every_steps = 5", want: []string{
			"t.toml:4: eval.tensorboard_every_steps applies only when eval.tensorboard = true"}},
		{name: "tensorboard off, interval at its default", body: "[eval]\ntensorboard = false\ntensorboard_every_steps = 10"},
		{name: "tensorboard per-epoch only", body: "[eval]\ntensorboard_every_steps = 0"},
		{name: "results dir", body: "results_dir = \"  \"", want: []string{`t.toml:2: results_dir must not be empty (got "  ")`}},
		{name: "init_from blank", body: "[model]\ninit_from = \" \"", want: []string{"t.toml:3: model.init_from must not be blank"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse([]byte(withMethod(tc.body)), "t.toml")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			err = Validate(e, testArchs())
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error:\n%v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain\n%s", err, w)
				}
			}
		})
	}
}

func TestValidateTopAndMethods(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"missing name", "[[method]]\nname = \"m\"\nplugin = \"sgd\"\n", []string{"t.toml: name is required"}},
		{"bad name", "name = \"a/b\"\n[[method]]\nname = \"m\"\nplugin = \"sgd\"\n", []string{"t.toml:1: name must be a single directory name"}},
		{"dot name", "name = \"..\"\n[[method]]\nname = \"m\"\nplugin = \"sgd\"\n", []string{"t.toml:1: name must be a single directory name"}},
		{"no method", "name = \"x\"\n", []string{"t.toml: at least one [[method]] table is required"}},
		{"method without name", "name = \"x\"\n[[method]]\nplugin = \"sgd\"\n", []string{"t.toml:2: method[0].name is required"}},
		{"method name with a bidi override", "name = \"x\"\n[[method]]\nname = \"SAM\u202eDGS\"\nplugin = \"sgd\"\n", []string{`t.toml:3: method[0].name "SAM\u202eDGS" must not contain '/', '=', control characters, invisible formatting characters`}},
		{"method name with a zero-width space", "name = \"x\"\n[[method]]\nname = \"SAM\u200b\"\nplugin = \"sgd\"\n", []string{`method[0].name "SAM\u200b" must not contain`}},
		{"duplicate method names", "name = \"x\"\n[[method]]\nname = \"SAM\"\nplugin = \"sam\"\n[[method]]\nname = \"sam\"\nplugin = \"sam\"\n",
			[]string{`t.toml:6: method[1].name "sam" is already used by method[0] (line 2)`}},
		{"plugin and path", "name = \"x\"\n[[method]]\nname = \"m\"\nplugin = \"sam\"\npath = \"bin/sam\"\n", []string{`t.toml:5: method "m": set exactly one of plugin and path (both are set)`}},
		{"neither plugin nor path", "name = \"x\"\n[[method]]\nname = \"m\"\n", []string{`t.toml:2: method "m": set exactly one of plugin`}},
		{"plugin with slash", "name = \"x\"\n[[method]]\nname = \"m\"\nplugin = \"bin/sam\"\n", []string{`t.toml:4: method "m": plugin "bin/sam" must be a plugin name`}},
		{"name with equals", "name = \"x\"\n[[method]]\nname = \"a=b\"\nplugin = \"sam\"\n", []string{`t.toml:3: method[0].name "a=b" must not contain`}},
		{"path ok", "name = \"x\"\n[[method]]\nname = \"Deep ensemble (5)\"\npath = \"/opt/plugins/de\"\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse([]byte(tc.src), "t.toml")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			err = Validate(e, testArchs())
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain\n%s", err, w)
				}
			}
		})
	}
}

func TestValidateInCode(t *testing.T) {
	// An Experiment built in code has no lines: messages omit them.
	e := Default()
	e.File = "code"
	e.Name = "x"
	e.Methods = []Method{{Name: "m", Plugin: "sgd"}}
	e.Train.BatchSize = 0
	e.Model.Archs = []string{"resnet50"}
	err := Validate(e, testArchs())
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 2 {
		t.Fatalf("got %v, want two problems", err)
	}
	for _, want := range []string{"code: train.batch_size must be > 0 (got 0)", `code: model.archs[0]: unknown arch "resnet50"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error\n%v\ndoes not contain %q", err, want)
		}
	}
	// Without a known-arch list only the syntax is checked.
	e.Train.BatchSize = 1
	if err := Validate(e, nil); err != nil {
		t.Errorf("Validate without known archs: %v", err)
	}
	if err := Validate(nil, nil); err == nil {
		t.Error("Validate(nil) succeeded")
	}
}

// TestLabelNoiseParse covers how [data.label_noise] decodes: the map as an
// inline table, a wrong type for it or its values, and --set overrides.
func TestLabelNoiseParse(t *testing.T) {
	const body = "[data.label_noise]\nkind = \"asymmetric\"\nrate = 0.1\n"
	e, err := Parse([]byte(withMethod(body+"map = {9 = 1, 2 = 0}")), "t.toml", "data.label_noise.map.3=5", "data.label_noise.seed=4")
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(e, testArchs()); err != nil {
		t.Fatal(err)
	}
	n := e.Data.LabelNoise
	if !n.Active() || n.Kind != NoiseAsymmetric || n.Rate != 0.1 || n.Seed != 4 {
		t.Errorf("decoded %+v", n)
	}
	if got, want := fmt.Sprint(n.ClassMap()), "map[2:0 3:5 9:1]"; got != want {
		t.Errorf("ClassMap() = %s, want %s", got, want)
	}
	if got, want := n.MapString(), "{2 = 0, 3 = 5, 9 = 1}"; got != want {
		t.Errorf("MapString() = %s, want %s", got, want)
	}
	if d := Default(); d.Data.LabelNoise.Active() {
		t.Errorf("label noise is on by default: %+v", d.Data.LabelNoise)
	}
	for _, tc := range []struct{ line, want string }{
		{"map = [9, 1]", "t.toml:5: data.label_noise.map must be a table (got an array)"},
		{"map = {9 = \"1\"}", `t.toml:5: data.label_noise.map.9 must be an integer (got string "1")`},
		{"mapping = {9 = 1}", `t.toml:5: unknown key "data.label_noise.mapping"`},
	} {
		_, err := Parse([]byte(withMethod(body+tc.line)), "t.toml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.line, err, tc.want)
		}
	}
}

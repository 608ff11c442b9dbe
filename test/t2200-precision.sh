#!/bin/sh
# Mixed precision on the CPU (train.precision bf16 and fp16), fp16's
# dynamic loss scaling, and device: cuda where there is no GPU.
. "$(dirname "$0")/lib.sh"

blobs_csv >blobs.csv
cat >mlp.yaml <<'YAML'
data: {train: train.dlt, test: test.dlt}
model: [dense: 32, relu, dense: 3]
train:
  epochs: 3
  batch: 16
  seed: 7
  log_every: 9
  optimizer: {adam: {lr: 1e-2}}
checkpoint: {every: 9 steps, keep: 20}
YAML
cat >cnn.yaml <<'YAML'
data: {train: itrain.dlt, test: itest.dlt}
model:
  - conv2d: {filters: 8, kernel: 3, pad: 1}
  - batchnorm
  - relu
  - maxpool: 2
  - flatten
  - dense: 4
train: {epochs: 2, batch: 32, seed: 3, log_every: 5, optimizer: {adam: {lr: 3e-3}}}
YAML

# acc RUN: its test accuracy
acc() {
	sed -n 's/.*"event":"done".*"test.acc":\([0-9.e-]*\).*/\1/p' "$1/metrics.jsonl"
}

# IDX files of 800 6x6 images of 4 kinds (a bright quadrant each, with
# noise) and their labels
images_idx() {
	perl -e 'srand(11); my ($img, $lab) = ("", "");
		for my $n (0 .. 799) {
			my $k = $n % 4; $lab .= pack("C", $k);
			for my $y (0 .. 5) { for my $x (0 .. 5) {
				my $q = ($y >= 3) * 2 + ($x >= 3);
				$img .= pack("C", int(140 * ($q == $k) + 110 * rand()));
			} }
		}
		open(my $i, ">", "img.idx") or die; binmode $i;
		print $i pack("NNNN", 0x803, 800, 6, 6), $img;
		open(my $l, ">", "lab.idx") or die; binmode $l;
		print $l pack("NN", 0x801, 800), $lab;'
}

test_expect_success 'the data' '
	dlt-prep csv blobs.csv --label kind --shuffle --split 0.8 -o train.dlt -o test.dlt &&
	images_idx &&
	dlt-prep idx img.idx lab.idx --shuffle --split 0.8 -o itrain.dlt -o itest.dlt
'

test_expect_success 'bf16 and fp16 train the MLP as well as fp32, not the same bits' '
	for p in fp32 bf16 fp16; do
		dlt-train -c mlp.yaml -o mlp-$p -s train.precision=$p -q >/dev/null || return 1
	done &&
	f32=$(acc mlp-fp32) && b16=$(acc mlp-bf16) && h16=$(acc mlp-fp16) &&
	echo "test accuracy: fp32 $f32, bf16 $b16, fp16 $h16" &&
	perl -e "exit !($f32 >= 0.9 && abs($b16 - $f32) <= 0.02 && abs($h16 - $f32) <= 0.02)" &&
	! cmp -s mlp-fp32/model.dlt mlp-bf16/model.dlt &&
	! cmp -s mlp-bf16/model.dlt mlp-fp16/model.dlt
'

test_expect_success 'bf16 and fp16 train a CNN with batchnorm as well as fp32' '
	for p in fp32 bf16 fp16; do
		dlt-train -c cnn.yaml -o cnn-$p -s train.precision=$p -q >/dev/null || return 1
	done &&
	f32=$(acc cnn-fp32) && b16=$(acc cnn-bf16) && h16=$(acc cnn-fp16) &&
	echo "test accuracy: fp32 $f32, bf16 $b16, fp16 $h16" &&
	perl -e "exit !($f32 >= 0.9 && abs($b16 - $f32) <= 0.03 && abs($h16 - $f32) <= 0.03)"
'

test_expect_success 'the same precision gives the same bits twice' '
	dlt-train -c mlp.yaml -o again -s train.precision=bf16 -q >/dev/null &&
	cmp mlp-bf16/model.dlt again/model.dlt
'

test_expect_success 'fp16 records its loss scale, 65536 and no skipped steps here' '
	grep -q "\"event\":\"train\",\"epoch\":1,\"step\":9,.*\"loss_scale\":65536,\"skipped\":0" \
		mlp-fp16/metrics.jsonl &&
	! grep -q "loss_scale" mlp-fp32/metrics.jsonl
'

# 2^40 times the loss gradient overflows fp16 (65504) at once: each step
# is skipped and halves the scale until the gradients fit (2^40 / 2^k with
# k about 28 for these gradients), then the run learns; after 20 clean
# steps the scale doubles, overflows again, and halves back.
test_expect_success 'an overflow skips the step and halves the scale; training recovers' '
	dlt-train -c mlp.yaml -o over -q -s train.precision=fp16 \
		-s train.loss_scale.init=1099511627776 -s train.loss_scale.growth_interval=20 \
		-s train.log_every=1 >/dev/null &&
	grep "\"event\":\"train\"" over/metrics.jsonl >train.jsonl &&
	sed -n "1p" train.jsonl | grep -q "\"step\":1,.*\"loss_scale\":549755813888,\"skipped\":1," &&
	sed -n "2p" train.jsonl | grep -q "\"step\":2,.*\"loss_scale\":274877906944,\"skipped\":2," &&
	perl -ne "/\"loss_scale\":([0-9.e+]+),\"skipped\":(\d+)/ or next;
		\$up++ if defined \$s && \$1 == 2 * \$s; \$s = \$1; \$k = \$2;
		END { print \"skipped \$k, doubled \$up times, last scale \$s\n\";
		      exit !(\$k >= 5 && \$k < 60 && \$up >= 1 && \$s < 1099511627776) }" train.jsonl &&
	a=$(acc over) && echo "test accuracy $a" && perl -e "exit !($a >= 0.9)"
'

test_expect_success 'an fp16 checkpoint keeps the scale: resume gives the same bytes' '
	grep "\"event\":\"train\"" over/metrics.jsonl | sed -n 30p |
		grep -o "\"loss_scale\":[0-9]*,\"skipped\":[0-9]*" >want &&
	dlt-ckpt info --json mlp-fp16/ckpt/step-00000045.dlt | grep -q "\"loss_scale\":65536" ||
		exit 1
	# alone after the list, so that $! is dlt-train, not a subshell
	DLT_TEST_STEP_DELAY=0.02 dlt-train -c mlp.yaml -o stop -q -s train.precision=fp16 \
		-s train.loss_scale.init=1099511627776 -s train.loss_scale.growth_interval=20 \
		-s train.log_every=1 >/dev/null 2>&1 &
	pid=$! &&
	until grep -q "\"step\":40," stop/metrics.jsonl 2>/dev/null; do sleep 0.05; done &&
	kill -TERM $pid && wait $pid &&
	dlt-train --resume stop -q >/dev/null &&
	cmp over/model.dlt stop/model.dlt &&
	cmp over/ckpt/step-00000081.dlt stop/ckpt/step-00000081.dlt
'

test_expect_success 'train.loss_scale: fp16 only, a power of two' '
	test_must_fail 2 "dlt-train: -s train.loss_scale.init=1024: train.loss_scale: applies to precision fp16 only, not fp32" \
		dlt-train -c mlp.yaml -o x -s train.loss_scale.init=1024 &&
	test_must_fail 2 "train.loss_scale.init: must be a power of two from 2^-126 to 2^127, got 1000" \
		dlt-train -c mlp.yaml -o x -s train.precision=fp16 -s train.loss_scale.init=1000 &&
	test_must_fail 2 "train.precision: unknown precision '"'"'fp8'"'"' (fp32, bf16, fp16)" \
		dlt-train -c mlp.yaml -o x -s train.precision=fp8
'

# peak RSS RUN ARGS...: dlt-train -o RUN ARGS..., its peak resident
# memory in KiB on stdout
peak_rss() {
	python3 -c '
import resource, subprocess, sys
subprocess.run(["dlt-train", "-q", "-o"] + sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@"
}

# 2048 windows of 32 a step: the activations outweigh the program (about
# 0.8 of 32's peak for 16, 0.84 under ASan)
test_expect_success 'train.storage: 16 and 32 train the bits of auto; 16 takes less memory' '
	gpt_text text && gpt_yaml gtrain.dlt gval.dlt >gpt.yaml &&
	dlt-prep text -q text --split 0.9 -o gtrain.dlt -o gval.dlt &&
	for s in auto 16 32; do
		peak_rss gpt-$s -c gpt.yaml -s train.precision=bf16 -s train.batch=2048 \
			-s train.steps=2 -s train.eval_every=0 -s train.threads=1 \
			-s train.storage=$s >rss-$s || return 1
	done &&
	echo "peak RSS (KiB): auto $(cat rss-auto), 16 $(cat rss-16), 32 $(cat rss-32)" &&
	perl -e "exit !($(cat rss-auto) < 0.9 * $(cat rss-32) && $(cat rss-16) < 0.9 * $(cat rss-32))" &&
	dlt-ckpt diff gpt-16/model.dlt gpt-32/model.dlt >diff &&
	grep -q "^all 16 tensors equal" diff &&
	dlt-ckpt diff gpt-auto/ckpt/step-00000002.dlt gpt-32/ckpt/step-00000002.dlt >diff &&
	grep -q "tensors equal" diff && ! grep -v "equal" diff | grep -qv "^tensor"
'

test_expect_success 'train.storage: bf16 and fp16 only; auto, 16 or 32' '
	test_must_fail 2 "train.storage: applies to precision bf16 and fp16 only, not fp32" \
		dlt-train -c mlp.yaml -o x -s train.storage=16 &&
	test_must_fail 2 "train.storage: expected auto, 16 or 32, got '"'"'8'"'"'" \
		dlt-train -c mlp.yaml -o x -s train.precision=bf16 -s train.storage=8
'

test_expect_success 'device: cuda without a GPU fails at once, exit 1' '
	if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
		echo "# a GPU is here: see make check-gpu"; return 0
	fi
	test_must_fail 1 "dlt-train: no CUDA device: " dlt-train -c mlp.yaml -o nogpu -s device=cuda &&
	cat "$TRASH/.stderr" && ! test -e nogpu &&
	test_must_fail 2 "device: unknown device '"'"'tpu'"'"' (cpu, cuda, cuda:N)" \
		dlt-train -c mlp.yaml -o x -s device=tpu
'
test_done

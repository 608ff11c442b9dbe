#!/bin/sh
# dlt-train on the GPU against the CPU: a small MLP (f32, bf16, fp16 with
# loss scaling) and a small CNN (conv with groups, batch norm, max and
# average pooling, dropout; f32 and bf16), the same config and seed on
# each device.  Both start from the same weights and see the same batches
# and dropout masks; only the order of float sums differs, so:
#   - the runs log the same steps, and every train record's loss agrees
#     within 0.01 + 2% (f32) or 0.02 + 5% (bf16, fp16: a sum's last bit
#     can move a value to the neighbouring 16-bit one);
#   - the final test accuracies agree within 0.015 (f32) or 0.03 (bf16,
#     fp16).
# Then NCCL with one rank (DLT_COMM=nccl): the bits of the run without a
# comm.  Without a CUDA device it says "skipped: no CUDA device" and passes.
. "$(dirname "$0")/../lib.sh"
# lib.sh takes the directory above the script's for the root: one more
PATH=$(cd "$TEST_DIR/../.." && pwd)/bin:$PATH

blobs_csv >blobs.csv

# 1500 12x12 images of three classes (a horizontal bar, a vertical bar, a
# diagonal; a third of their pixels missing) over strong noise, from a fixed
# LCG, as IDX: hard enough that accuracy stays below 100%
perl -e '
	my $s = 4242;
	sub r { $s = ($s * 1103515245 + 12345) % 2147483648; return $s / 2147483648; }
	my ($n, $h) = (1500, 12);
	open(my $img, ">:raw", "img.idx") or die;
	open(my $lab, ">:raw", "lab.idx") or die;
	print $img pack("N4", 0x803, $n, $h, $h);
	print $lab pack("N2", 0x801, $n);
	for (1 .. $n) {
		my $k = int(r() * 3);
		my $p = 2 + int(r() * ($h - 4));
		print $lab pack("C", $k);
		for my $y (0 .. $h - 1) {
			for my $x (0 .. $h - 1) {
				my $on = $k == 0 ? $y == $p : $k == 1 ? $x == $p : $x - $y == $p - 6;
				$on = 0 if r() < 0.3;
				print $img pack("C", $on ? 140 + int(r() * 115) : int(r() * 160));
			}
		}
	}'

cat >mlp.yaml <<'YAML'
data: {train: train.dlt, test: test.dlt, val_split: 0.1}
model:
  - dense: 32
  - relu
  - dropout: 0.1
  - dense: 16
  - gelu
  - dense: 3
train:
  epochs: 4
  batch: 25
  seed: 7
  log_every: 5
  optimizer: {adam: {lr: 1e-2}}
  schedule: {cosine: {warmup: 5}}
YAML

cat >cnn.yaml <<'YAML'
data: {train: itrain.dlt, test: itest.dlt, val_split: 0.1}
model:
  - conv2d: {filters: 8, kernel: 3, pad: 1}
  - batchnorm
  - relu
  - maxpool: 2
  - conv2d: {filters: 16, kernel: 3, pad: 1, groups: 2}
  - relu
  - avgpool: 2
  - flatten
  - dropout: 0.2
  - dense: 3
train:
  epochs: 3
  batch: 50
  seed: 3
  log_every: 5
  optimizer: {sgd: {lr: 0.05, momentum: 0.9, nesterov: true}}
YAML

dlt-prep csv -q blobs.csv --label kind --shuffle --split 0.8 -o train.dlt -o test.dlt &&
dlt-prep idx -q img.idx lab.idx --shuffle --split 0.8 -o itrain.dlt -o itest.dlt || exit 1

# The first GPU run tells whether there is a GPU.
if ! dlt-train -c mlp.yaml -o mlp-f32-cuda -s device=cuda -q >/dev/null 2>cuda.err; then
	if grep -q "no CUDA device" cuda.err; then
		echo "1..0 # skipped: no CUDA device ($(sed 's/.*no CUDA device: //' cuda.err))"
		exit 0
	fi
fi

# agree CPU_RUN CUDA_RUN LOSS_ABS LOSS_REL ACC: the train losses and the
# test accuracy of two runs, within the tolerances
agree() {
	perl -e '
		my ($a, $b, $abs, $rel, $acc) = @ARGV;
		sub curve {
			my ($run) = @_;
			my (@loss, $test, $rate);
			open(my $f, "<", "$run/metrics.jsonl") or die "$run: $!\n";
			while (<$f>) {
				push @loss, [$1, $2] if /"event":"train".*"step":(\d+),"loss":([^,]+)/;
				$rate = $1 if /"event":"train".*"samples_per_s":([^,}]+)/;
				$test = $1 if /"event":"eval","split":"test".*"acc":([^,]+)/;
			}
			die "$run: no train records\n" unless @loss;
			die "$run: no test accuracy\n" unless defined $test;
			return (\@loss, $test, $rate // 0);
		}
		my ($la, $ta, $ra) = curve($a);
		my ($lb, $tb, $rb) = curve($b);
		my $bad = 0;
		die "$a logs " . @$la . " train records, $b " . @$lb . "\n" if @$la != @$lb;
		my $worst = 0;
		for my $i (0 .. $#$la) {
			my ($sa, $va) = @{$la->[$i]};
			my ($sb, $vb) = @{$lb->[$i]};
			die "record $i: step $sa and $sb\n" if $sa != $sb;
			my $d = abs($va - $vb);
			$worst = $d if $d > $worst;
			if ($d > $abs + $rel * abs($va)) {
				print "step $sa: loss $va on the CPU, $vb on the GPU\n";
				$bad = 1;
			}
		}
		printf "%d records, worst loss difference %.3g; test accuracy %.4f (CPU), " .
		    "%.4f (GPU); %.0f and %.0f samples/s\n", scalar @$la, $worst, $ta, $tb, $ra, $rb;
		if (abs($ta - $tb) > $acc) {
			print "test accuracy differs by more than $acc\n";
			$bad = 1;
		}
		exit $bad;
	' "$@"
}

# compare NAME CONFIG LOSS_ABS LOSS_REL ACC [-s KEY=VALUE...]: trains
# NAME-cpu and NAME-cuda (unless there) and checks that they agree; the
# comparison's summary stays in NAME.txt
compare() {
	name=$1 config=$2 abs=$3 rel=$4 acc=$5
	shift 5
	dlt-train -c "$config" -o "$name-cpu" -q "$@" >/dev/null &&
	{ test -d "$name-cuda" || dlt-train -c "$config" -o "$name-cuda" -s device=cuda -q "$@" \
		>/dev/null; } &&
	grep -q '"status":"done"' "$name-cuda/status" &&
	agree "$name-cpu" "$name-cuda" "$abs" "$rel" "$acc" >"$name.txt"
	rc=$?
	cat "$name.txt"
	return $rc
}

# summary NAME: the comparison's numbers as a TAP comment
summary() {
	test -f "$1.txt" && sed 's/^/# /' "$1.txt"
	return 0
}

test_expect_success 'MLP f32: the GPU run tracks the CPU run' '
	cat cuda.err &&
	compare mlp-f32 mlp.yaml 0.01 0.02 0.015
'
summary mlp-f32

test_expect_success 'MLP bf16: the GPU run tracks the CPU run' '
	compare mlp-bf16 mlp.yaml 0.02 0.05 0.03 -s train.precision=bf16
'
summary mlp-bf16

test_expect_success 'MLP fp16 with loss scaling: the GPU run tracks the CPU run' '
	compare mlp-fp16 mlp.yaml 0.02 0.05 0.03 -s train.precision=fp16
'
summary mlp-fp16

test_expect_success 'CNN f32: the GPU run tracks the CPU run' '
	compare cnn-f32 cnn.yaml 0.01 0.02 0.015
'
summary cnn-f32

test_expect_success 'CNN bf16: the GPU run tracks the CPU run' '
	compare cnn-bf16 cnn.yaml 0.02 0.05 0.03 -s train.precision=bf16
'
summary cnn-bf16

test_expect_success 'CNN f32 on the GPU: the same run twice gives the same weights' '
	dlt-train -c cnn.yaml -o cnn-again -s device=cuda -q >/dev/null &&
	cmp cnn-f32-cuda/model.dlt cnn-again/model.dlt
'

# A GPT: token windows, the sequence layers' CUDA kernels (embedding,
# positions, layernorm, attention), GELU tanh, a tied head
perl -e 'srand(7); my @w = qw(the a program of to is in computer that it and for
	you be with as on not this are data science was by or if);
	for (1 .. 20000) { print $w[int(rand(@w))], rand() < 0.1 ? ".\n" : " " }' >text.txt
cat >gpt.yaml <<'YAML'
data: {train: ttrain.dlt, test: ttest.dlt}
model:
  - embedding: {vocab: 256, dim: 64, name: wte}
  - positional: 64
  - residual: [layernorm, attention: {heads: 4}]
  - residual: [layernorm, dense: 256, gelu: tanh, dense: 64]
  - residual: [layernorm, attention: {heads: 4}]
  - residual: [layernorm, dense: 256, gelu: tanh, dense: 64]
  - layernorm
  - dense: {tie: wte, bias: false}
train:
  steps: 60
  context: 64
  batch: 16
  seed: 2
  init: gpt2
  clip: 1.0
  log_every: 5
  eval_batches: 4
  optimizer: {adamw: {lr: 2e-3, weight_decay: 0.1, decay: matrices}}
YAML
dlt-prep text -q text.txt --split 0.9 -o ttrain.dlt -o ttest.dlt || exit 1

test_expect_success 'GPT f32: the GPU run tracks the CPU run' '
	compare gpt-f32 gpt.yaml 0.01 0.02 0.02
'
summary gpt-f32

test_expect_success 'GPT bf16: the GPU run tracks the CPU run' '
	compare gpt-bf16 gpt.yaml 0.03 0.05 0.04 -s train.precision=bf16
'
summary gpt-bf16

# train.storage 16 on the GPU: activations kept in 16 bits (narrow, widen,
# the products reading 16-bit operands, the attention a range of batches
# at a time), the bits of f32 storage (the GPU's default)
test_expect_success 'GPT bf16 on the GPU: storage 16 trains the bits of storage 32' '
	dlt-train -c gpt.yaml -o gpt-bf16-s16 -s device=cuda -q -s train.precision=bf16 \
		-s train.storage=16 >/dev/null &&
	dlt-ckpt diff gpt-bf16-cuda/model.dlt gpt-bf16-s16/model.dlt >s16.diff &&
	tail -1 s16.diff && grep -q "^all [0-9]* tensors equal" s16.diff
'

test_expect_success 'dlt-infer --device cuda: the greedy text of the CPU, and the same score' '
	dlt-infer -m gpt-f32-cuda/model.dlt --device cuda --generate 40 --temperature 0 "the " >g.cuda &&
	dlt-infer -m gpt-f32-cuda/model.dlt --device cpu --generate 40 --temperature 0 "the " >g.cpu &&
	cat g.cuda && echo && cmp g.cuda g.cpu &&
	dlt-infer -m gpt-f32-cuda/model.dlt --device cuda --score text.txt >s.cuda &&
	dlt-infer -m gpt-f32-cuda/model.dlt --device cpu --score text.txt >s.cpu &&
	cat s.cuda s.cpu &&
	a=$(sed -n "s/^loss: \([0-9.]*\).*/\1/p" s.cuda) && b=$(sed -n "s/^loss: \([0-9.]*\).*/\1/p" s.cpu) &&
	perl -e "exit !(abs($a - $b) < 1e-3)"
'

# The NCCL path on one GPU (DLT_COMM=nccl): a communicator of one rank
# broadcasts the start, sums each gradient bucket while backward runs (in
# 0.001 MB buckets, several a step) and sums the metrics.  A rank's sum is
# its own values, so nothing may change a bit: the weights and every
# logged loss are those of the run without a comm.  NCCL_DEBUG shows that
# NCCL ran (INIT) and each collective it ran (COLL).
# tensors_equal A B OUT: every tensor of two checkpoints the same bits
# (dlt-ckpt diff's table in OUT)
tensors_equal() {
	dlt-ckpt diff "$1" "$2" >"$3" && cat "$3" && grep -q equal "$3" && ! grep -q differs "$3"
}

test_expect_success 'DLT_COMM=nccl --gpus 1: the bucket path over a 1-rank NCCL comm, the bits of no comm' '
	DLT_COMM=nccl NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL dlt-train -c cnn.yaml \
		-o cnn-nccl1 --gpus 1 -q -s dist.bucket_mb=0.001 >nccl1.log 2>&1
	status=$?
	grep -v "NCCL INFO AllReduce\|NCCL INFO Broadcast" nccl1.log | tail -20
	echo "$(grep -c "NCCL INFO AllReduce" nccl1.log) all-reduces," \
		"$(grep -c "NCCL INFO Broadcast" nccl1.log) broadcasts"
	test $status = 0 &&
	grep -q "NCCL INFO.*Init COMPLETE" nccl1.log &&
	grep -q "NCCL INFO AllReduce" nccl1.log &&
	tensors_equal cnn-f32-cuda/model.dlt cnn-nccl1/model.dlt nccl1.diff &&
	agree cnn-f32-cuda cnn-nccl1 0 0 0
'
test -f nccl1.log && echo "# NCCL of one rank: $(grep -c "NCCL INFO AllReduce" nccl1.log)" \
	"all-reduces, $(grep -c "NCCL INFO Broadcast" nccl1.log) broadcasts"

test_expect_success 'DLT_COMM=nccl without a launcher: one rank, its NCCL id its own' '
	DLT_COMM=nccl NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT dlt-train -c mlp.yaml \
		-o mlp-nccl1 -s device=cuda -q >nccl2.log 2>&1
	status=$?
	tail -5 nccl2.log
	test $status = 0 && grep -q "NCCL INFO.*Init COMPLETE" nccl2.log &&
	tensors_equal mlp-f32-cuda/model.dlt mlp-nccl1/model.dlt nccl2.diff &&
	agree mlp-f32-cuda mlp-nccl1 0 0 0
'

# ZeRO over a 1-rank NCCL comm: the ordered reduce-scatter (grouped send
# and receive, the pieces added in rank order), the sharded step and the
# all-gather of the parameters; one rank's sums are its own values, so the
# weights are the run without a comm's
for z in 0 1 2; do
	test_expect_success "DLT_COMM=nccl --gpus 1, dist.zero $z: the bits of no comm" "
		DLT_COMM=nccl dlt-train -c gpt.yaml -o gpt-zero$z --gpus 1 -q -s device=cuda \
			-s dist.zero=$z -s dist.bucket_mb=0.05 >zero$z.log 2>&1
		status=\$?
		tail -3 zero$z.log
		test \$status = 0 && dlt-ckpt export -f npy -o a$z gpt-f32-cuda/model.dlt &&
		dlt-ckpt export -f npy -o b$z gpt-zero$z/model.dlt && diff -r a$z b$z
	"
done

# data parallelism over NCCL: the multi-GPU test, where there are GPUs for it
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU")
if [ "$ngpu" -ge 2 ]; then
	test_expect_success '--gpus 2 (NCCL): the weights one GPU trains, within 1e-4 relative L2' '
		dlt-train -c mlp.yaml -o mlp-gpus2 --gpus 2 -q >/dev/null &&
		dlt-ckpt diff mlp-f32-cuda/model.dlt mlp-gpus2/model.dlt |
			awk "\$2 == \"equal\" || \$2 == \"differs\" { if (\$4 > m) m = \$4 }
			     END { print \"relative L2\", m + 0; exit !(m < 1e-4) }"
	'
	# a pipeline's stages send activations and gradients over NCCL's
	# point to point (its lanes), and the tied head's gradient
	test_expect_success '--gpus 2, dist.pipeline of 2 stages, M = 3: the GPT of one GPU, within 1e-4 relative L2' '
		dlt-train -c gpt.yaml -o gpt-pipe2 --gpus 2 -q -s device=cuda \
			-s "dist.pipeline={stages: 2, microbatches: 3}" >/dev/null &&
		dlt-ckpt diff gpt-f32-cuda/model.dlt gpt-pipe2/model.dlt |
			awk "\$2 == \"equal\" || \$2 == \"differs\" { if (\$4 > m) m = \$4 }
			     END { print \"relative L2\", m + 0; exit !(m < 1e-4) }"
	'
	test_expect_success '--gpus 2: kill -9 of a rank ends the job, naming the rank' '
		DLT_TEST_STEP_DELAY=0.05 dlt-train -c mlp.yaml -o mlp-kill --gpus 2 -q \
			>/dev/null 2>err & job=$! &&
		sleep 3 && pkill -9 -f "mlp-kill" -n && ! wait $job &&
		grep -q "rank [01] died of signal 9" err
	'
	# the ranks are the launcher's children, rank 1 forked after rank 0
	test_expect_success '--gpus 2: a stalled rank (SIGSTOP) is named when the wait times out' '
		DLT_TEST_STEP_DELAY=0.05 dlt-train -c mlp.yaml -o mlp-stall --gpus 2 -q \
			-s dist.timeout=10 >/dev/null 2>err & job=$! &&
		sleep 5 && rank1=$(pgrep -P $job | sort -n | tail -1) &&
		kill -STOP $rank1 && { wait $job; status=$?; } ; kill -9 $rank1 2>/dev/null
		cat err && test $status = 1 &&
		grep -q "no answer from rank 1 in 10 s (it died or stalls)" err
	'
else
	test_count=$((test_count + 1))
	echo "ok $test_count # skip --gpus 2 needs two GPUs, this machine has $ngpu"
fi

test_done

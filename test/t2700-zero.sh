#!/bin/sh
# ZeRO (dist.zero, issue 30): the ranks sum their gradients in rank order
# (a reduce-scatter of pieces added up by each range's rank), so that
# stage 0 (every rank updates everything), 1 (each rank keeps and updates
# the optimizer state of its range of the parameters), 2 (the same, the
# sums begun bucket by bucket during backward, the other ranks' parts of
# the gradients let go) and 3 (each rank holds its range of the weights
# too, an op's gathered before it runs and let go after) train the same
# bits, at 2, 3 and 4 ranks, where the ranges are uneven.  Checkpoints hold
# stage 0's tensors (each rank writes its own ranges into the file, none
# gathers: t2710), and a stage-1 run resumes to the bytes of the run that
# never stopped.
. "$(dirname "$0")/lib.sh"
mpi_tests

# clipping on, and low enough to clip: the global norm is summed over the
# ranks' ranges
cat >mlp.yaml <<'YAML'
data: {train: train.dlt, test: test.dlt}
model: [flatten, {dense: 256}, relu, {dense: 128}, relu, {dense: 10}]
train: {epochs: 1, batch: 128, seed: 0, clip: 0.5, optimizer: {adam: {lr: 1e-3}},
        schedule: cosine}
dist: {timeout: 20}
YAML

gpt_yaml gtrain.dlt gval.dlt >gpt.yaml
printf "checkpoint: {every: 20 steps}
dist: {timeout: 20}
" >>gpt.yaml

# same_tensors A B: the tensors of two model files byte for byte (their
# config differs in its dist.zero line, so the files themselves do not)
same_tensors() {
	rm -rf a.npy b.npy &&
	dlt-ckpt export -f npy -o a.npy "$1" && dlt-ckpt export -f npy -o b.npy "$2" &&
	test -n "$(ls a.npy)" && diff -r a.npy b.npy
}

# stages NP CONFIG NAME ARGS...: dist.zero 0, 1, 2 and 3 at NP ranks,
# each model's tensors the bytes of stage 0's
stages() {
	np=$1 cfg=$2 name=$3 && shift 3 &&
	for z in 0 1 2 3; do
		mpirun -np $np dlt-train -q -c $cfg -o $name$z -s dist.zero=$z "$@" >out 2>err ||
			{ cat err; return 1; }
	done &&
	same_tensors ${name}0/model.dlt ${name}1/model.dlt &&
	same_tensors ${name}0/model.dlt ${name}2/model.dlt &&
	same_tensors ${name}0/model.dlt ${name}3/model.dlt
}

test_expect_success 'prepare the images (94 batches) and a token stream' '
	fmnist_12000 && gpt_text text &&
	dlt-prep text text --split 0.9 -o gtrain.dlt -o gval.dlt
'

test_expect_success 'dist.zero is 0 to 3, and 3 on CPU ranks only' '
	test_must_fail 2 "dist.zero" dlt-train -c mlp.yaml -o bad -s dist.zero=4 &&
	test_must_fail 2 "dist.zero=3: dist.zero 3 runs on CPU ranks only; on GPUs use dist.zero 2" \
		dlt-train -c mlp.yaml -o bad -s dist.zero=3 -s device=cuda &&
	! test -e bad
'

test_expect_success 'MLP, 2 ranks: ZeRO 0, 1, 2 and 3 train the same bits' '
	stages 2 mlp.yaml m2_ &&
	grep -q "\"event\":\"done\"" m2_1/metrics.jsonl
'

test_expect_success 'MLP, 3 ranks (uneven ranges), 0.1 MB buckets: the same bits' '
	stages 3 mlp.yaml m3_ -s dist.bucket_mb=0.1
'

test_expect_success 'MLP, 4 ranks, 2 micro-batches a step: the same bits' '
	stages 4 mlp.yaml m4_ -s dist.bucket_mb=0.1 -s train.accumulate=2
'

# a small CNN (convolutions with their pools fused, a dense head), 2
# micro-batches a step, clipping: 40 steps at 4 ranks
cat >cnn.yaml <<'YAML'
data: {train: train.dlt}
model: [{conv2d: {filters: 8, kernel: 3, pad: 1}}, relu, {maxpool: 2},
        {conv2d: {filters: 16, kernel: 3, pad: 1}}, relu, {maxpool: 2}, flatten, {dense: 10}]
train: {epochs: 1, batch: 64, seed: 0, clip: 0.5, accumulate: 2, optimizer: {adam: {lr: 1e-3}}}
dist: {timeout: 20}
YAML

test_expect_success 'CNN, 4 ranks, 2 micro-batches a step, clipping: the same bits' '
	stages 4 cnn.yaml c4_ -s dist.bucket_mb=0.01 -s data.val_split=0.9 &&
	test $(grep -c "\"event\":\"train\"" c4_0/metrics.jsonl) -ge 1
'

test_expect_success 'GPT (tied head, decay on matrices), 2 ranks: the same bits' '
	stages 2 gpt.yaml g2_ -s dist.bucket_mb=0.01
'

test_expect_success 'GPT, 3 ranks: the same bits' '
	stages 3 gpt.yaml g3_ -s dist.bucket_mb=0.01
'

test_expect_success 'GPT, 3 ranks, 2 micro-batches a step: the same bits' '
	stages 3 gpt.yaml a3_ -s dist.bucket_mb=0.01 -s train.accumulate=2
'

test_expect_success 'GPT, 4 ranks, 2 micro-batches a step: the same bits' '
	stages 4 gpt.yaml a4_ -s dist.bucket_mb=0.01 -s train.accumulate=2
'

# 12000 images in batches of 169: the last has one, and rank 1 none
test_expect_success 'MLP, 2 ranks, a rank with no sample in the last batch: the same bits' '
	stages 2 mlp.yaml n2_ -s train.batch=169
'

# Records: rank 0's last train record has each rank's bytes sent a step
# ("sent") and peak memory ("peak_mib"); a step's sum of the gradients
# (stage 0), or its reduce-scatter and all-gather (1, 2), is 2P(N-1)/N
# values of 4 bytes for P parameters (raw_size: 4P) at N ranks, each
# rank within 0.1 % of that (the ranges are uneven at 3).  Stage 3
# gathers each op's weights for forward and again for backward: 3P(N-1)/N
# over the ranks (a ring's all-gather has each rank pass on all pieces
# but the next rank's, so ranks that hold other layers send other counts)
test_expect_success 'rank 0 records the bytes each rank sent a step: 2P(N-1)/N values at every stage' '
	for run in m2_0 m2_1 m2_2 m3_0 m3_1 m3_2 g3_0 g3_1 g3_2; do
		n=${run#?} && n=${n%%_*} &&
		raw=$(dlt-ckpt info --json $run/model.dlt | sed -n "s/.*\"raw_size\":\([0-9]*\).*/\1/p") &&
		rec=$(grep "\"event\":\"train\"" $run/metrics.jsonl | tail -1) &&
		sent=$(echo "$rec" | sed -n "s/.*\"sent\":\[\([^]]*\)\].*/\1/p") &&
		peak=$(echo "$rec" | sed -n "s/.*\"peak_mib\":\[\([^]]*\)\].*/\1/p") &&
		echo "$run: $n ranks, 4P = $raw bytes; sent a step [$sent], peak MiB [$peak]" &&
		perl -e "my @s = split /,/, \"$sent\"; my @p = split /,/, \"$peak\";
			my \$want = 2 * $raw * ($n - 1) / $n;
			exit !(@s == $n && @p == $n && !grep { abs(\$_ - \$want) > 1e-3 * \$want } @s)" ||
			return 1
	done
'

# mean_sent RUN: the mean over the ranks of the bytes sent a step
mean_sent() {
	grep "\"event\":\"train\"" $1/metrics.jsonl | tail -1 |
		sed -n "s/.*\"sent\":\[\([^]]*\)\].*/\1/p" |
		awk -F, "{ for (i = 1; i <= NF; i++) s += \$i; print s / NF }"
}

# The GPT's stage 3 gathers more than 3P: its tied embedding (W = 256 x 32)
# twice more, for the head's forward and backward, and its layer norms (6
# x 32 in all), whose outputs backward remakes, once more
test_expect_success 'ZeRO 3 sends 3P(N-1)/N values a step (the GPT: + 2W + its layer norms)' '
	for run in m2_3 m3_3 g3_3; do
		n=${run#?} && n=${n%%_*} &&
		raw=$(dlt-ckpt info --json $run/model.dlt | sed -n "s/.*\"raw_size\":\([0-9]*\).*/\1/p") &&
		extra=0 && case $run in g*) extra=$(((2 * 256 * 32 + 6 * 32) * 4)) ;; esac &&
		mean=$(mean_sent $run) &&
		echo "$run: $n ranks, 4P = $raw bytes; mean sent a step $mean" &&
		perl -e "my \$want = (3 * $raw + $extra) * ($n - 1) / $n;
			exit !(abs($mean - \$want) <= 1e-3 * \$want)" || return 1
	done
'

# a loss scale of 2^30 overflows fp16 for a dozen steps: each rank sees
# infs in its range or not, and all skip together
test_expect_success 'GPT in fp16, 3 ranks, skipped steps: the same bits' '
	stages 3 gpt.yaml h3_ -s dist.bucket_mb=0.01 -s train.precision=fp16 \
		-s train.loss_scale.init=1073741824 &&
	s=$(grep -o "\"skipped\":[0-9]*" h3_1/metrics.jsonl | tail -1 | cut -d: -f2) &&
	echo "skipped $s" && test $s -gt 0
'

test_expect_success 'clipping acts: without it the GPT trains other bits' '
	mpirun -np 3 dlt-train -q -c gpt.yaml -o noclip -s dist.zero=1 -s dist.bucket_mb=0.01 \
		-s train.clip=0 &&
	! same_tensors g3_1/model.dlt noclip/model.dlt
'

test_expect_success 'checkpoints of stages 1 to 3 hold the tensors of stage 0'"'"'s' '
	for z in 1 2 3; do
		dlt-ckpt diff g3_0/ckpt/step-00000040.dlt g3_$z/ckpt/step-00000040.dlt >diff &&
		grep -q "^optim.v/wte.w *equal" diff && grep -q "^wte.w *equal" diff &&
		! grep -q differs diff || return 1
	done
'

test_expect_success 'ZeRO 3 at 3 ranks stopped and resumed: the bytes of the run that never stopped' '
	DLT_TEST_STEP_DELAY=0.03 mpirun -np 3 dlt-train -q -c gpt.yaml -o z3 -s dist.zero=3 \
		-s dist.bucket_mb=0.01 >out 2>err & job=$! &&
	test_wait_until 30 test -e z3/ckpt/step-00000020.dlt &&
	kill -TERM $(rank_pid 0) && wait $job &&
	grep -q "\"status\":\"stopped\"" z3/status &&
	mpirun -np 3 dlt-train -q --resume z3 >out &&
	cmp g3_3/ckpt/step-00000060.dlt z3/ckpt/step-00000060.dlt &&
	cmp g3_3/model.dlt z3/model.dlt
'

test_expect_success 'ZeRO 1 at 3 ranks stopped and resumed: the bytes of the run that never stopped' '
	mpirun -np 3 dlt-train -q -c mlp.yaml -o ref -s dist.zero=1 \
		-s checkpoint.every="20 steps" >out &&
	DLT_TEST_STEP_DELAY=0.03 mpirun -np 3 dlt-train -q -c mlp.yaml -o stopped \
		-s dist.zero=1 -s checkpoint.every="20 steps" >out 2>err & job=$! &&
	test_wait_until 30 test -e stopped/ckpt/step-00000040.dlt &&
	kill -TERM $(rank_pid 0) && wait $job &&
	grep -q "\"status\":\"stopped\"" stopped/status &&
	cp -r stopped moved2 && cp -r stopped moved1 &&
	mpirun -np 3 dlt-train -q --resume stopped >out &&
	cmp ref/model.dlt stopped/model.dlt &&
	cmp ref/ckpt/step-00000080.dlt stopped/ckpt/step-00000080.dlt
'

test_expect_success 'its checkpoint resumes at 2 ranks and in one process (within 1e-6)' '
	mpirun -np 2 dlt-train -q --resume moved2 >out &&
	dlt-train -q --resume moved1 >out &&
	d2=$(rel_l2 ref/model.dlt moved2/model.dlt) && d1=$(rel_l2 ref/model.dlt moved1/model.dlt) &&
	echo "relative L2: 2 ranks $d2, one process $d1" &&
	perl -e "exit !($d2 < 1e-6 && $d1 < 1e-6)"
'

# Each rank's optimizer state: 8 bytes a parameter of its range (Adam's m
# and v), 8 ceil(P / N) on rank 0; the peak RSS of rank 1 falls by that
# from stage 0 to stage 1 (and no rank holds the whole state to write a
# checkpoint: t2710).  A GPT of 7.2 M parameters, 4 steps.
{
	printf "data: {train: gtrain.dlt}\nmodel:\n  - embedding: {vocab: 256, dim: 384, name: wte}\n"
	printf "  - positional: {max: 32}\n"
	gpt_blocks 4 384 4
	printf "  - layernorm\n  - dense: {tie: wte, bias: false}\n"
	printf "train: {steps: 4, context: 32, batch: 8, seed: 1, clip: 1.0, "
	printf "optimizer: {adamw: {lr: 1e-3}}}\ndist: {timeout: 60, bucket_mb: 1}\n"
} >big.yaml

# rss RUN RANK: the peak RSS in bytes that rank's time(1) wrote
rss() {
	sed -n "s/^rank $2 maxrss \([0-9]*\)$/\1/p" $1.rss | awk "{ print \$1 * 1024 }"
}

test_expect_success 'ZeRO 1 at 2 ranks: 8P/2 bytes of optimizer state a rank, and rank 1 peaks lower by that' '
	test -x /usr/bin/time || { echo "no /usr/bin/time: peak RSS not measured"; return 0; }
	for z in 0 1; do
		mpirun -np 2 sh -c "exec /usr/bin/time -f \"rank \$OMPI_COMM_WORLD_RANK maxrss %M\" \
			dlt-train -q -c big.yaml -o big$z -s dist.zero=$z" 2>big$z.rss >out ||
			{ cat big$z.rss; return 1; }
	done &&
	s0=$(sed -n "s/.*\"optim_state_bytes\":\([0-9]*\).*/\1/p" big0/metrics.jsonl) &&
	s1=$(sed -n "s/.*\"optim_state_bytes\":\([0-9]*\).*/\1/p" big1/metrics.jsonl) &&
	p=$((s0 / 8)) && echo "P = $p parameters: optimizer state $s0 bytes at stage 0, $s1 at 1" &&
	test $s1 = $((8 * ((p + 1) / 2))) &&
	r0=$(rss big0 1) && r1=$(rss big1 1) &&
	echo "rank 1 peak RSS: stage 0 $r0, stage 1 $r1 bytes; saved $((r0 - r1)), 8P/2 = $((4 * p))" &&
	perl -e "exit !(abs(($r0 - $r1) - 4 * $p) < 0.25 * 4 * $p)"
'

# The memory of weights, gradients and optimizer state, the pages of them
# a rank holds (state_mib, its peak over the log window, mincore): fp32
# Adam's 16P for stage 0, 8P + 8P/N for 1, 4P + 12P/N for 2 and 16P/N for
# 3, at N = 4 on a GPT of 24.8 M parameters; stages 2 and 3 add one op's
# working set, its weights and gradients (the largest op: 640 x 2560 + 2560
# parameters) and a bucket (1 MB).  Each within 10 %, and stage 3 below 2.
{
	printf "data: {train: gtrain.dlt}\nmodel:\n  - embedding: {vocab: 256, dim: 640, name: wte}\n"
	printf "  - positional: {max: 32}\n"
	gpt_blocks 5 640 5
	printf "  - layernorm\n  - dense: {tie: wte, bias: false}\n"
	printf "train: {steps: 2, context: 32, batch: 8, seed: 1, clip: 1.0, log_every: 1,\n"
	printf "        optimizer: {adamw: {lr: 1e-3}}}\ndist: {timeout: 60, bucket_mb: 1}\n"
} >huge.yaml

test_expect_success 'ZeRO 0 to 3 at 4 ranks: the weights, gradients and optimizer state of the formula' '
	for z in 0 1 2 3; do
		mpirun -np 4 dlt-train -q -c huge.yaml -o huge$z -s dist.zero=$z >out 2>err ||
			{ cat err; return 1; }
	done &&
	raw=$(dlt-ckpt info --json huge0/model.dlt | sed -n "s/.*\"raw_size\":\([0-9]*\).*/\1/p") &&
	for z in 0 1 2 3; do
		grep "\"event\":\"train\"" huge$z/metrics.jsonl | tail -1 |
			sed -n "s/.*\"state_mib\":\[\([^]]*\)\].*/\1/p" >state$z || return 1
	done &&
	echo "4P = $raw bytes; state MiB by rank: 0 [$(cat state0)] 1 [$(cat state1)]" \
		"2 [$(cat state2)] 3 [$(cat state3)]" &&
	perl -e "my \$p = $raw / 4, \$n = 4, \$mib = 1 << 20;
		my \$ws = 2 * 4 * (640 * 2560 + 2560) + 1e6;
		my @want = (16 * \$p, 8 * \$p + 8 * \$p / \$n, 4 * \$p + 12 * \$p / \$n + \$ws,
			    16 * \$p / \$n + \$ws);
		my \$bad = 0, @max;
		for my \$z (0 .. 3) {
			open my \$f, q(<), qq(state\$z) or die; my @r = split /,/, <\$f>;
			\$max[\$z] = (sort { \$b <=> \$a } @r)[0];
			for (@r) {
				my \$d = abs(\$_ * \$mib - \$want[\$z]) / \$want[\$z];
				printf qq(stage %d: %.1f MiB, formula %.1f, off by %.1f %%\n),
					\$z, \$_, \$want[\$z] / \$mib, 100 * \$d if \$_ == \$r[0];
				\$bad = 1 if @r != 4 || \$d > 0.1;
			}
		}
		exit(\$bad || \$max[3] >= \$max[2])"
'

test_done

#!/bin/sh
# Pipelines (dist.pipeline, issue 30 part 3): the GPT's ops cut into
# stages, one an MPI rank (times data-parallel replicas), and each step's
# micro-batches through them in 1F1B's or GPipe's order, each stage
# computing its forward again before its backward.  The parameters end
# within 1e-5 of one process's after 50 steps (gpt_close) for M = 1, 3
# and 8 at 2 stages, alone and times 2 replicas with ZeRO 1, M < S and M
# not a multiple of S at 3; the tied embedding and head, on the first and
# last stage, get their gradients summed; evaluation runs through the
# stages; checkpoints are any run's.
. "$(dirname "$0")/lib.sh"
mpi_tests

gpt_text text
gpt_yaml train.dlt val.dlt >gpt.yaml
echo "checkpoint: {every: 20 steps}" >>gpt.yaml
O="-s train.steps=50 -s train.optimizer.adamw.lr=1e-3"

# pipe NAME NP PIPELINE ARGS...: the GPT at NP ranks as dist.pipeline
pipe() {
	name=$1 np=$2 p=$3 && shift 3 &&
	with_ranks mpirun -np $np dlt-train -q -c gpt.yaml -o $name $O \
		-s "dist.pipeline=$p" "$@" >out 2>err || { cat err; return 1; }
}

test_expect_success 'prepare the tokens and train one process' '
	dlt-prep text text --split 0.9 -o train.dlt -o val.dlt &&
	dlt-train -q -c gpt.yaml -o one $O >out
'

for m in 1 3 8; do
	test_expect_success "2 stages, 1F1B, M = $m: the parameters of one process within 1e-5" '
		pipe p2_'$m' 2 "{stages: 2, microbatches: '$m'}" &&
		gpt_close one/model.dlt p2_'$m'/model.dlt
	'
done

for m in 1 3 8; do
	test_expect_success "2 stages x 2 replicas, ZeRO 1, M = $m: within 1e-5 of one process" '
		pipe d2_'$m' 4 "{stages: 2, microbatches: '$m'}" -s dist.zero=1 &&
		gpt_close one/model.dlt d2_'$m'/model.dlt
	'
done

test_expect_success '2 stages, GPipe, M = 3: the bytes of 1F1B' '
	pipe g2_3 2 "{stages: 2, microbatches: 3, schedule: gpipe}" &&
	dlt-ckpt diff p2_3/model.dlt g2_3/model.dlt >d &&
	test $(grep -c " equal " d) = 16 && ! grep -q differs d
'

test_expect_success '3 stages, M = 2 (fewer than the stages) and M = 4: within 1e-5' '
	pipe p3_2 3 "{stages: 3, microbatches: 2}" && gpt_close one/model.dlt p3_2/model.dlt &&
	pipe p3_4 3 "{stages: 3, microbatches: 4}" && gpt_close one/model.dlt p3_4/model.dlt
'

test_expect_success 'the records: the losses and the validation of one process, to rounding' '
	for run in one p2_3; do
		grep "\"split\":\"val\"" $run/metrics.jsonl | sed "s/.*\"loss\":\([^,]*\).*/\1/" >$run.val || return 1
	done &&
	test $(wc -l <one.val) = 3 && paste one.val p2_3.val |
		awk "{ d = (\$1 - \$2) / \$1; if (d < 0) d = -d; if (d > 1e-5) bad = 1 } END { exit bad }"
'

test_expect_success 'split: the stages begin where the config says' '
	pipe s2 2 "{stages: 2, microbatches: 2, split: [5]}" &&
	gpt_close one/model.dlt s2/model.dlt
'

test_expect_success '2 stages x 2 replicas stopped and resumed: the bytes of the run that never stopped' '
	DLT_TEST_STEP_DELAY=0.05 with_ranks mpirun -np 4 -x DLT_TEST_STEP_DELAY dlt-train -q \
		-c gpt.yaml -o stop $O -s "dist.pipeline={stages: 2, microbatches: 3}" \
		-s dist.zero=1 >out 2>err & job=$! &&
	test_wait_until 30 test -e stop/ckpt/step-00000020.dlt &&
	kill -TERM $(rank_pid 0) && wait $job &&
	grep -q "\"status\":\"stopped\"" stop/status &&
	with_ranks mpirun -np 4 dlt-train -q --resume stop >out &&
	cmp d2_3/ckpt/step-00000040.dlt stop/ckpt/step-00000040.dlt &&
	cmp d2_3/model.dlt stop/model.dlt
'

# The checkpoint of step 40 (each stage's ranks write their own weights
# and optimizer state into it, none gathers) goes on in one process, and
# at 3 stages
test_expect_success 'a checkpoint of a pipeline resumes in one process and at 3 stages' '
	for r in moved1 moved3; do
		cp -r p2_3 $r && rm $r/model.dlt && echo "{\"status\":\"stopped\"}" >$r/status || return 1
	done &&
	grep -q "pipeline: {stages: 2, microbatches: 3, schedule: 1f1b}" moved1/config.yaml &&
	dlt-train -q --resume moved1 -s dist.pipeline=null >out &&
	! grep -q pipeline moved1/config.yaml &&
	gpt_close p2_3/model.dlt moved1/model.dlt &&
	with_ranks mpirun -np 3 dlt-train -q --resume moved3 -s "dist.pipeline={stages: 3}" >out &&
	gpt_close p2_3/model.dlt moved3/model.dlt
'

# Resharding: the checkpoint of 4 ranks with ZeRO 3 (each rank writes its
# ranges of the weights and the optimizer state into the layout of any
# run, t2710) goes on at 3 ranks with ZeRO 1, at 2 as a pipeline of 2
# stages and in one process.
# What each writes right after loading (DLT_TEST_CKPT_ON_RESUME) is what
# was saved, tensor for tensor (parameters, m and v, the loop's position
# and sums); after 50 more steps each is within 1e-5 of the 4 ranks'
test_expect_success 'ZeRO 3 at 4 ranks goes on with ZeRO 1 at 3, as 2 stages and in one process' '
	with_ranks mpirun -np 4 dlt-train -q -c gpt.yaml -o z4 -s train.steps=100 \
		-s train.optimizer.adamw.lr=1e-3 -s dist.zero=3 -s checkpoint.every="50 steps" >out &&
	stopped_copies z4 00000100 r3 r2 r1 && resume_resharded &&
	for r in r3 r2 r1; do
		! cmp -s z4/ckpt/step-00000050.dlt $r/ckpt/step-00000050.dlt &&
		dlt-ckpt diff z4/ckpt/step-00000050.dlt $r/ckpt/step-00000050.dlt >d &&
		grep -q "^all 48 tensors equal" d &&
		for f in z4 $r; do
			dlt-ckpt info --json $f/ckpt/step-00000050.dlt | python3 -c "import json, sys
d = json.load(sys.stdin)
print(json.dumps([d[k] for k in (\"step\", \"epoch\", \"batch\", \"loss_scale\", \"scale_clean\",
                                 \"skipped\", \"sums\", \"last\")]))" >$f.state || return 1
		done && cmp z4.state $r.state || return 1
	done &&
	gpt_close z4/model.dlt r3/model.dlt && gpt_close z4/model.dlt r2/model.dlt &&
	gpt_close z4/model.dlt r1/model.dlt
'

# A stage's rank holds its own weights, gradients and optimizer state
# (state_mib: the pages of them in memory): at 2 stages of a GPT of 3.2 M
# parameters, each under 0.6 of what a data-parallel rank holds
test_expect_success '2 stages: each rank holds its stage'"'"'s weights, gradients and state alone' '
	{
		printf "data: {train: train.dlt}\nmodel:\n  - embedding: {vocab: 256, dim: 256, name: wte}\n"
		printf "  - positional: {max: 32}\n"
		gpt_blocks 4 256 4
		printf "  - layernorm\n  - dense: {tie: wte, bias: false}\n"
		printf "train: {steps: 3, context: 32, batch: 8, seed: 1, log_every: 1, "
		printf "optimizer: {adamw: {lr: 1e-3}}}\n"
	} >mid.yaml &&
	with_ranks mpirun -np 2 dlt-train -q -c mid.yaml -o mid_dp >out &&
	with_ranks mpirun -np 2 dlt-train -q -c mid.yaml -o mid_pp -s "dist.pipeline={stages: 2}" >out &&
	for r in mid_dp mid_pp; do
		grep "\"event\":\"train\"" $r/metrics.jsonl | tail -1 |
			sed -n "s/.*\"state_mib\":\[\([^]]*\)\].*/\1/p" >$r.state || return 1
	done &&
	echo "state MiB by rank: data parallel [$(cat mid_dp.state)], 2 stages [$(cat mid_pp.state)]" &&
	perl -e "open my \$a, q(<), q(mid_dp.state); open my \$b, q(<), q(mid_pp.state);
		my @d = split /,/, <\$a>; my @p = split /,/, <\$b>;
		exit !(@d == 2 && @p == 2 && \$d[0] > 40 && !grep { \$_ > 0.6 * \$d[0] } @p)"
'

test_expect_success 'bad pipelines: one-line errors, exit 2, no run directory' '
	test_must_fail 2 "dist.pipeline.stages 3 runs on a multiple of 3 ranks (its stages times data-parallel replicas), not 1" \
		dlt-train -c gpt.yaml -o bad -s "dist.pipeline={stages: 3}" &&
	test_must_fail 2 "dist.pipeline.stages: must be" \
		dlt-train -c gpt.yaml -o bad -s "dist.pipeline={stages: 1}" &&
	test_must_fail 2 "dist.pipeline.split: a stage cannot begin at layer 3 (inside a residual block" \
		dlt-train -c gpt.yaml -o bad -s "dist.pipeline={stages: 2, split: [3]}" &&
	test_must_fail 2 "dist.pipeline.split: a stage cannot begin at layer 99 (the model has no such layer)" \
		dlt-train -c gpt.yaml -o bad -s "dist.pipeline={stages: 2, split: [99]}" &&
	test_must_fail 2 "dist.pipeline.stages 9: the model has 4 places" \
		dlt-train -c gpt.yaml -o bad -s "dist.pipeline={stages: 9}" &&
	test_must_fail 2 "dist.pipeline: its micro-batches are the step'"'"'s, and its replicas shard the optimizer state (ZeRO 1): no train.accumulate, dist.zero 1 or none" \
		dlt-train -c gpt.yaml -o bad -s "dist.pipeline={stages: 2}" -s dist.zero=2 &&
	test_must_fail 2 "dist.pipeline.split: a list of stages - 1 = 1" \
		dlt-train -c gpt.yaml -o bad -s "dist.pipeline={stages: 2, split: [3, 6]}" &&
	test_must_fail 2 "dist.pipeline.schedule: expected 1f1b or gpipe" \
		dlt-train -c gpt.yaml -o bad -s "dist.pipeline={stages: 2, schedule: zb}" &&
	! test -e bad
'

test_done

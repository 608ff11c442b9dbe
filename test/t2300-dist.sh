#!/bin/sh
# Data parallelism on the CPU: ranks of mpirun summing their gradients
# through MPI train the model that one process trains with the same
# global batch; a rank that dies or stalls ends the job on every rank,
# and --restarts continues it from the last checkpoint.  DLT_COMM=mpi runs
# the same path with one process.
. "$(dirname "$0")/lib.sh"
mpi_tests

cat >mlp.yaml <<'YAML'
data: {train: train.dlt, test: test.dlt}
model: [flatten, {dense: 256}, relu, {dense: 128}, relu, {dense: 10}]
train: {epochs: 1, batch: 128, seed: 0, optimizer: {adam: {lr: 1e-3}}, schedule: cosine}
dist: {timeout: 10}
YAML

# wait_for FILE PATTERN: until a line of FILE matches (at most 30 s).  The
# jobs it watches log every 5 steps: the first record of the default (every
# 100 steps) is the epoch's last, and a rank stopped after the job's last
# sum leaves the other waiting in MPI_Finalize, which has no deadline.
wait_for() {
	i=0
	until grep -q "$2" "$1" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 600 ] || { echo "timed out waiting for $2 in $1"; return 1; }
		sleep 0.05
	done
}

# no_ranks_left: no process of the job is running any more
no_ranks_left() {
	sleep 0.5
	test -z "$(ours)"
}

# wait_file FILE: until it exists (at most 30 s)
wait_file() {
	i=0
	until test -e "$1"; do
		i=$((i + 1))
		[ $i -lt 600 ] || { echo "timed out waiting for $1"; return 1; }
		sleep 0.05
	done
}

test_expect_success 'prepare 12000 training images (94 batches) and the test set' '
	fmnist_12000
'

test_expect_success 'mpirun -np 2: the parameters of one process within 1e-5 relative L2' '
	dlt-train -q -c mlp.yaml -o one &&
	mpirun -np 2 dlt-train -q -c mlp.yaml -o two >out 2>err &&
	d=$(rel_l2 one/model.dlt two/model.dlt) && echo "relative L2 $d" &&
	perl -e "exit !($d < 1e-5)" &&
	grep -q "\"event\":\"done\"" two/metrics.jsonl &&
	test $(wc -l <one/metrics.jsonl) = $(wc -l <two/metrics.jsonl)
'

test_expect_success 'gradients summed in 0.1 MB buckets during backward: the same tensors as one bucket' '
	mpirun -np 2 dlt-train -q -c mlp.yaml -o buckets -s dist.bucket_mb=0.1 >out 2>err &&
	dlt-ckpt diff two/model.dlt buckets/model.dlt >diff && cat diff &&
	! grep -q differs diff
'

test_expect_success 'rank 0 alone prints and writes: one result line, one run directory' '
	mpirun -np 2 dlt-train -c mlp.yaml -o three >out 2>err &&
	test $(grep -c "^test accuracy" out) = 1 &&
	test $(grep -c "^epoch 1/1" out) = 1 &&
	! test -e three/three
'

test_expect_success 'three epochs of all 60000 images: test accuracy of one process +-0.2 points' '
	prep_full() {
		dlt-prep idx -q $FMNIST/train-images-idx3-ubyte.gz \
			$FMNIST/train-labels-idx1-ubyte.gz -o full.dlt
	} &&
	prep_full &&
	dlt-train -c mlp.yaml -o full1 -s data.train=full.dlt -s train.epochs=3 >out1 &&
	mpirun -np 2 dlt-train -c mlp.yaml -o full2 -s data.train=full.dlt \
		-s train.epochs=3 >out2 &&
	a=$(sed -n "s/^test accuracy: //p" out1) && b=$(sed -n "s/^test accuracy: //p" out2) &&
	echo "one process $a, two ranks $b" &&
	perl -e "exit !(abs($a - $b) <= 0.002)"
'

test_expect_success 'kill -9 of rank 1: rank 0 ends within 15 s, non-zero, rank named' '
	DLT_TEST_STEP_DELAY=0.05 dlt-train --ranks 2 -c mlp.yaml -o killed -s train.log_every=5 \
		>out 2>err & job=$! &&
	wait_for killed/metrics.jsonl "\"step\":" &&
	pid=$(rank_pid 1) && kill -9 $pid && t0=$(date +%s) &&
	{ wait $job; status=$?; } ; t1=$(date +%s) &&
	echo "exit $status after $((t1 - t0)) s" && cat err &&
	test $status = 1 && test $((t1 - t0)) -le 15 &&
	grep -q "rank 1" err && no_ranks_left
'

test_expect_success 'a stalled rank (SIGSTOP) ends the job after dist.timeout, named by rank 0' '
	DLT_TEST_STEP_DELAY=0.05 dlt-train --ranks 2 -c mlp.yaml -o stalled -s train.log_every=5 \
		>out 2>err & job=$! &&
	wait_for stalled/metrics.jsonl "\"step\":" &&
	pid=$(rank_pid 1) && kill -STOP $pid && t0=$(date +%s) &&
	{ wait $job; status=$?; } ; t1=$(date +%s) &&
	echo "exit $status after $((t1 - t0)) s" && cat err &&
	test $status = 1 && test $((t1 - t0)) -le 25 &&
	grep -q "^dlt-train: rank 0: [a-z ]*: no answer from rank 1 in 10 s (it died or stalls)$" err &&
	no_ranks_left
'

# Rank 0 sleeps 0.4 s a step, rank 1 0.01 s: rank 1 waits in each sum,
# having told rank 0 it reached it, and is stopped there.  It is named
# all the same: a waiting rank tells its point again while it waits.
test_expect_success 'a rank stopped inside a sum it reached is named too' '
	mpirun -np 1 -x DLT_TEST_STEP_DELAY=0.4 dlt-train -c mlp.yaml -o inside \
		-s train.log_every=5 -s dist.timeout=4 : \
		-np 1 -x DLT_TEST_STEP_DELAY=0.01 dlt-train -c mlp.yaml -o inside \
		-s train.log_every=5 -s dist.timeout=4 >out 2>err & job=$! &&
	wait_for inside/metrics.jsonl "\"step\":" && sleep 0.3 &&
	pid=$(rank_pid 1) && kill -STOP $pid &&
	{ wait $job; status=$?; } ; cat err &&
	test $status != 0 &&
	grep -q "^dlt-train: rank 0: [a-z ]*: no answer from rank 1 in 4 s (it died or stalls)$" err &&
	no_ranks_left
'

# Injected faults (DLT_TEST_FAULT): each ends every rank at once, exit
# 1, naming the rank.  A rank that makes a collective the others do not
# (an extra sum of its gradients, as from a micro-batch more) is caught
# before MPI pairs the two (a read of the wrong size, which crashes it):
# the ranks first agree on each collective's kind, size and number.
test_expect_success 'a NaN on rank 1, or a sum more on rank 1 of 2 and rank 2 of 3: exit 1, rank named' '
	DLT_TEST_FAULT=nan:1:5 dlt-train --ranks 2 -c mlp.yaml -o nan >out 2>err;
	test $? = 1 && cat err &&
	grep -q "^dlt-train: rank 1: step 5: the loss is nan" err && no_ranks_left &&
	DLT_TEST_FAULT=extra:1:5 dlt-train --ranks 2 -c mlp.yaml -o extra2 >out 2>err;
	test $? = 1 && cat err &&
	grep -q "^dlt-train: rank 0: metrics sum: rank 1 makes another collective: its number [0-9]* is a gradient sum of 235146 values, the other ranks. a metrics sum of [0-9]* (it took another path" err &&
	no_ranks_left &&
	DLT_TEST_FAULT=extra:2:3 dlt-train --ranks 3 -c mlp.yaml -o extra3 >out 2>err;
	test $? = 1 && cat err &&
	grep -q "^dlt-train: rank 0: .*: rank 2 makes another collective" err &&
	grep -q "^dlt-train: rank 1: .*: rank 2 makes another collective" err &&
	! grep -q "Segmentation\|signal" err && no_ranks_left
'

test_expect_success '--restarts: kill -9 of a rank, the job restarts and ends as if never killed' '
	dlt-train -q --ranks 2 -c mlp.yaml -o ref2 -s checkpoint.every="20 steps" &&
	DLT_TEST_STEP_DELAY=0.05 dlt-train -q --ranks 2 --restarts 3 -c mlp.yaml -o restarted \
		-s checkpoint.every="20 steps" >out 2>err & job=$! &&
	wait_file restarted/ckpt/step-00000040.dlt &&
	kill -9 $(rank_pid 1) &&
	wait $job && cat err &&
	grep -q "restart 1 of 3" err &&
	grep -q "\"event\":\"resume\"" restarted/metrics.jsonl &&
	cmp ref2/model.dlt restarted/model.dlt && no_ranks_left
'

test_expect_success 'a run of two ranks resumes in one process (batches are global)' '
	DLT_TEST_STEP_DELAY=0.05 mpirun -np 2 dlt-train -q -c mlp.yaml -o moved \
		-s checkpoint.every="20 steps" >out 2>err & job=$! &&
	wait_file moved/ckpt/step-00000040.dlt &&
	kill -TERM $(rank_pid 0) && wait $job &&
	grep -q "\"status\":\"stopped\"" moved/status &&
	dlt-train -q --resume moved &&
	d=$(rel_l2 one/model.dlt moved/model.dlt) && echo "relative L2 $d" &&
	perl -e "exit !($d < 1e-5)"
'

# DLT_COMM=mpi: one process opens MPI and sums its gradient buckets (0.1
# MB, several a step), its start and its metrics as a rank of a larger
# job; the sums of one rank are its own values, so not a bit changes
test_expect_success 'DLT_COMM=mpi: one process through the bucket path, the bits of no comm' '
	DLT_COMM=mpi dlt-train -q -c mlp.yaml -o comm1 -s dist.bucket_mb=0.1 &&
	dlt-ckpt diff one/model.dlt comm1/model.dlt >diff && cat diff &&
	grep -q equal diff && ! grep -q differs diff &&
	grep -o "\"loss\":[^,]*" one/metrics.jsonl >loss1 &&
	grep -o "\"loss\":[^,]*" comm1/metrics.jsonl >loss2 &&
	test -s loss1 && cmp loss1 loss2
'

test_expect_success 'DLT_COMM: the other device'"'"'s comm or another name is a usage error' '
	test_must_fail 2 "DLT_COMM=nccl: the run trains on the CPU, whose comm is mpi" \
		env DLT_COMM=nccl dlt-train -c mlp.yaml -o nccl &&
	! test -e nccl &&
	test_must_fail 2 "DLT_COMM: '"'"'gloo'"'"' is not nccl or mpi" \
		env DLT_COMM=gloo dlt-train -c mlp.yaml -o gloo &&
	! test -e gloo
'

test_expect_success '--gpus without a GPU: the one-line error, exit 1' '
	test_must_fail 1 "no CUDA device" dlt-train --gpus 2 -c mlp.yaml -o gpus &&
	! test -e gpus
'

test_expect_success 'rank options under a launcher are refused' '
	OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 \
		test_must_fail 2 "started by mpirun" dlt-train --restarts 2 -c mlp.yaml
'
test_done

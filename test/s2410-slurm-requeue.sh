#!/bin/sh
# Fault tolerance the Slurm way (make check-slurm): a job of
# examples/slurm/train-cpu.sbatch that Slurm requeues, or that gets the
# time limit's TERM, goes on from its last checkpoint by itself and ends
# with the checkpoint of a run that was never interrupted.
. "$(dirname "$0")/lib.sh"
[ -n "${SLURM_CONF:-}" ] || { echo "1..0 # SKIP no Slurm: run by make check-slurm"; exit 0; }
# sbatch passes the environment on: the steps of each job sleep 30 ms, so
# that a requeue lands in the middle of an epoch (94 steps)
DLT_THREADS=1
export DLT_THREADS

cat >mlp2.yaml <<'YAML'
data: {train: train.dlt, test: test.dlt}
model: [flatten, {dense: 256}, relu, {dense: 128}, relu, {dense: 10}]
train: {epochs: 2, batch: 128, seed: 0, optimizer: {adam: {lr: 1e-3}}, schedule: cosine}
YAML

# submit: the example script on this one node, one task, one core
submit() {
	DLT_TEST_STEP_DELAY=0.03 sbatch --parsable -N1 -n1 --ntasks-per-node=1 -c1 -t 5 \
		-o job-%j.log "$ROOT/examples/slurm/train-cpu.sbatch" mlp2.yaml
}

# running RUN: until the run's status says running (at most 30 s)
running() {
	test_wait_until 30 grep -q '"status":"running"' "$1/status"
}

queue_lacks() {
	test -z "$(squeue -h -j "$1")"
}

# gone JOB: until the job left the queue (at most 90 s), then its state
gone() {
	test_wait_until 90 queue_lacks "$1" || { squeue; return 1; }
	scontrol show job -o "$1" | tr ' ' '\n' | grep -E '^(JobState|Restarts|ExitCode)='
}

# resumed RUN JOB: metrics.jsonl has one resume record, of Slurm's first
# requeue of JOB, from a checkpoint in the middle of an epoch
resumed() {
	grep '"event":"resume"' "$1/metrics.jsonl" >resume && cat resume &&
	test $(wc -l <resume) = 1 &&
	grep -q "\"slurm_job\":\"$2\",\"slurm_restart_count\":1}" resume &&
	step=$(sed 's/.*"step":\([0-9]*\).*/\1/' resume) &&
	test $((step % 94)) != 0
}

test_expect_success 'prepare 12000 training images and the test set; the run uninterrupted' '
	fmnist_12000 &&
	dlt-train -q -c mlp2.yaml -o ref
'

test_expect_success 'scontrol requeue in the middle of an epoch: the job goes on by itself to the checkpoint of the run uninterrupted' '
	t0=$(date +%s) && submitted=$(date +%s.%N) &&
	j=$(submit) && run=runs/mlp2-$j &&
	running $run && cp $run/status first-status &&
	sleep 1 &&
	scontrol requeue $j &&
	gone $j >state && cat state job-$j.log &&
	grep -qx JobState=COMPLETED state && grep -qx Restarts=1 state &&
	grep -qx ExitCode=0:0 state &&
	cmp ref/ckpt/step-00000188.dlt $run/ckpt/step-00000188.dlt &&
	cmp ref/model.dlt $run/model.dlt &&
	resumed $run $j &&
	grep -q "\"status\":\"done\".*\"slurm_job\":\"$j\"" $run/status &&
	start=$(sed "s/.*\"start\":\([0-9.]*\).*/\1/" first-status) &&
	startup=$(sed -n "s/.*\"startup\":\([0-9.]*\).*/\1/p" $run/metrics.jsonl) &&
	echo "sbatch to the run open: $(echo "$start - $submitted" | bc) s;" \
		"startup of the resumed process: $startup s; the requeue test: $(($(date +%s) - t0)) s" \
		>>"$TRASH/timings"
'

test_expect_success 'TERM to the batch script (what --signal=B:TERM@60 sends): the ranks checkpoint and exit, the job requeues itself and ends as the run uninterrupted' '
	t0=$(date +%s) &&
	j=$(submit) && run=runs/mlp2-$j &&
	running $run && sleep 1 &&
	scancel --batch --signal=TERM $j &&
	gone $j >state && cat state job-$j.log &&
	grep -q "^dlt-train: stopped at step [0-9]*; checkpoint $run/ckpt/step-" job-$j.log &&
	grep -qx JobState=COMPLETED state && grep -qx Restarts=1 state &&
	cmp ref/ckpt/step-00000188.dlt $run/ckpt/step-00000188.dlt &&
	resumed $run $j &&
	echo "the TERM test: $(($(date +%s) - t0)) s" >>"$TRASH/timings"
'

test_expect_success '--auto-resume of a run that is done (a job requeued after its end) leaves it as it is' '
	j=$(sbatch --parsable -n1 -c1 -t 5 -o again-%j.log \
		--wrap "dlt-train -c mlp2.yaml -o ref --auto-resume") &&
	gone $j >state && cat state again-$j.log &&
	grep -qx JobState=COMPLETED state &&
	grep -qx "dlt-train: ref: the run is done" again-$j.log &&
	! grep -q "\"event\":\"resume\"" ref/metrics.jsonl
'

test_expect_success 'the queue is empty' '
	test -z "$(squeue -h)"
'

sed 's/^/# /' timings 2>/dev/null
test_done

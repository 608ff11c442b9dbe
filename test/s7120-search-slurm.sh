#!/bin/sh
# dlt-search --launcher slurm (make check-slurm): every trial and promotion
# of an ASHA search a Slurm job, with the leaderboard of the local launcher;
# kill -9 of the searcher and --resume adopt its jobs, none runs twice;
# SIGTERM scancels them.
[ -n "${SLURM_CONF:-}" ] || { echo "1..0 # SKIP no Slurm: run by make check-slurm"; exit 0; }
. "$(dirname "$0")/lib.sh"
# one core a trial, so the cluster's two run two trials at once
DLT_THREADS=1
export DLT_THREADS

blobs_csv >blobs.csv
cat >mlp.yaml <<'YAML'
data: {train: train.dlt, test: test.dlt}
model: [dense: 16, relu, dense: 3]
train: {epochs: 4, batch: 16, seed: 7, log_every: 1000, optimizer: {adam: {lr: 1e-2}}}
YAML
cat >asha.yaml <<'YAML'
base: mlp.yaml
metric: test.acc
method: asha
trials: 6
seed: 3
eta: 2
min_epochs: 1
max_epochs: 4
parallel: 2
params:
  train.optimizer.adam.lr: {loguniform: [1e-4, 1e-1]}
  model.0.dense: {choice: [4, 8, 16, 32]}
YAML

# jobs_of DIR: "ID STATE N" of each Slurm job that the search in DIR
# submitted (job N of its journal), from Slurm's own list
jobs_of() {
	squeue -h --me --states=all -o '%i %T %k' |
		sed -n "s|^\([0-9]*\) \([A-Z_]*\) dlt-search $PWD/$1 job \([0-9]*\)$|\1 \2 \3|p" | sort -n
}

# active DIR: its jobs still queued or running
active() {
	squeue -h --me -o '%i %k' | grep " dlt-search $PWD/$1 job " || true
}

# decisions DIR: the jobs the search decided on (start and promote events)
decisions() {
	grep -c -E '"event":"(start|promote)"' "$1/journal.jsonl"
}

# jobids DIR: the job ids of its launch and adopt events, one a line, sorted
jobids() {
	sed -n 's/.*"event":"\(launch\|adopt\)",.*"jobid":\([0-9]*\),.*/\2/p' "$1/journal.jsonl" | sort -n
}

# kill_when DIR N: kill -9 the searcher $! once DIR's journal has N results
# and a job of it is in the queue
kill_when() {
	i=0
	until [ "$(cat $1/journal.jsonl 2>/dev/null | grep -c "\"event\":\"finish\"")" -ge $2 ] &&
		[ -n "$(active $1)" ]; do
		i=$((i + 1))
		[ $i -lt 600 ] || return 1
		sleep 0.05
	done
	kill -9 $!
}

test_expect_success 'setup: data, and the search with the local launcher' '
	dlt-prep csv blobs.csv --label kind --shuffle --split 0.8 -o train.dlt -o test.dlt &&
	dlt-search -q -c asha.yaml -o local -j 2 >local.txt &&
	test $(grep -c " done " local.txt) = 1 &&
	grep -q "\"launcher\":\"local\"" local/journal.jsonl
'

test_expect_success 'slurm -j 2: each trial and promotion a Slurm job, the leaderboard of local' '
	dlt-search -q -c asha.yaml -o sl -j 2 --launcher slurm --sbatch-args "-t 5 -J '"'dlt trial'"'" >sl.txt 2>err &&
	test ! -s err && test_cmp local.txt sl.txt &&
	grep -q "^{\"event\":\"search\",.*\"launcher\":\"slurm\",\"sbatch_args\":" sl/journal.jsonl &&
	! grep -q "\"event\":\"launch\",.*\"pid\"" sl/journal.jsonl &&
	jobids sl >journal.ids && test $(wc -l <journal.ids) = $(decisions sl) &&
	jobs_of sl >slurm.jobs && cat slurm.jobs &&
	cut -d" " -f1 slurm.jobs >slurm.ids && test_cmp journal.ids slurm.ids &&
	test $(grep -c " COMPLETED " slurm.jobs) = $(decisions sl) &&
	test "$(squeue -h --states=all -j $(head -1 journal.ids) -o %j)" = "dlt trial" &&
	grep -q "^test accuracy" sl/logs/000.log &&
	test -z "$(active sl)"
'

test_expect_success 'kill -9 of the searcher: its jobs stay queued or running' '
	DLT_TEST_STEP_DELAY=0.05 dlt-search -q -c asha.yaml -o k -j 2 --launcher slurm \
		>/dev/null 2>k.err &
	kill_when k 2 &&
	active k >left && cat left && test -s left
'

test_expect_success '--resume adopts them: no trial ran twice, the leaderboard of local' '
	dlt-search --resume k -q >k.txt 2>err &&
	test ! -s err && test_cmp local.txt k.txt &&
	grep "\"event\":\"adopt\"" k/journal.jsonl &&
	test $(grep -c "\"event\":\"resume\",.*\"launcher\":\"slurm\"" k/journal.jsonl) = 1 &&
	jobs_of k >slurm.jobs && cat slurm.jobs &&
	test $(wc -l <slurm.jobs) = $(decisions k) &&
	cut -d" " -f3 slurm.jobs | sort -n | uniq -d >twice && test ! -s twice &&
	test $(grep -c " COMPLETED " slurm.jobs) = $(decisions k) &&
	jobids k | uniq >journal.ids && cut -d" " -f1 slurm.jobs >slurm.ids &&
	test_cmp journal.ids slurm.ids &&
	for m in k/trials/*/metrics.jsonl; do
		grep "\"split\":\"test\"" $m | grep -o "\"epoch\":[0-9]*" | uniq -d >dup &&
		test ! -s dup || return 1
	done &&
	test -z "$(active k)"
'

test_expect_success 'SIGTERM: the searcher scancels its jobs; --resume finishes the search' '
	DLT_TEST_STEP_DELAY=0.05 dlt-search -q -c asha.yaml -o t -j 2 --launcher slurm \
		>/dev/null 2>t.err &
	pid=$! i=0 &&
	until [ "$(squeue -h --me -t R -o "%k" | grep -c " $PWD/t job ")" = 2 ]; do
		i=$((i + 1)); [ $i -lt 300 ] || return 1; sleep 0.1; done &&
	kill -TERM $pid && { wait $pid; test $? = 1; } &&
	test "$(cat t.err)" = "dlt-search: stopped; go on with: dlt-search --resume t" &&
	test -z "$(active t)" &&
	jobs_of t >slurm.jobs && cat slurm.jobs &&
	test $(grep -c " CANCELLED " slurm.jobs) = 2 &&
	dlt-search --resume t -q >t.txt && test_cmp local.txt t.txt &&
	test -z "$(active t)"
'

test_expect_success 'sbatch refusing a job: the search fails with its message, nothing queued' '
	test_must_fail 1 "trial 000: sbatch: sbatch: unrecognized option" \
		dlt-search -q -c asha.yaml -o bad --launcher slurm --sbatch-args --nosuch &&
	test -z "$(active bad)"
'

test_done

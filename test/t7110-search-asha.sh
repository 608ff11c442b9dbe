#!/bin/sh
# dlt-search method asha on a Fashion-MNIST subset (1,200 training images,
# 500 test images): 27 trials over learning rate and width against the
# same 27 trained fully; the same leaderboard with -j 1 and -j 2 and after
# kill -9 and --resume; the journal shows each epoch trained once.
. "$(dirname "$0")/lib.sh"
src=/usr/share/datasets/fashion-mnist
# one thread a trial whatever -j is, so no trial waits on a busy core's
# OpenMP barrier and the numbers do not depend on -j
DLT_THREADS=1
export DLT_THREADS

cat >mlp.yaml <<'YAML'
data: {train: train.dlt, test: test.dlt}
model: [flatten, {dense: 32}, relu, {dense: 10}]
train: {epochs: 9, batch: 32, seed: 1, log_every: 1000, optimizer: {adam: {lr: 1e-3}}}
YAML
cat >asha.yaml <<'YAML'
base: mlp.yaml
metric: test.acc
method: asha
trials: 27
seed: 1
eta: 3
min_epochs: 1
max_epochs: 9
parallel: 2
params:
  train.optimizer.adam.lr: {loguniform: [1e-4, 1e-1]}
  model.1.dense: {choice: [8, 16, 32, 64]}
YAML
sed -e 's/method: asha/method: random/' -e '/^eta:/d' -e '/_epochs:/d' -e '/^parallel:/d' \
	asha.yaml >full.yaml

# The epochs each trial trained: one test record an epoch in its metrics.
epochs_trained() {
	cat "$1"/trials/*/metrics.jsonl | grep -c '"event":"eval","split":"test"'
}

# The decisions of a search: its start and promote events, untimed.
decisions() {
	grep -E '"event":"(start|promote)"' "$1/journal.jsonl" | sed 's/,"time":[^}]*//'
}

test_expect_success 'setup: 1,200 training and 500 test images of Fashion-MNIST' '
	dlt-prep idx -q $src/train-images-idx3-ubyte.gz $src/train-labels-idx1-ubyte.gz \
		--shuffle --seed 1 --split 0.02 -o train.dlt -o /dev/null &&
	dlt-prep idx -q $src/t10k-images-idx3-ubyte.gz $src/t10k-labels-idx1-ubyte.gz \
		--shuffle --seed 2 --split 0.05 -o test.dlt -o /dev/null &&
	dlt-prep info --json train.dlt | grep -q "\"n\":1200" &&
	dlt-prep info --json test.dlt | grep -q "\"n\":500"
'

test_expect_success 'asha: 27 trials take at most a third of the epochs of all 27 trained fully' '
	dlt-search -q -c asha.yaml -o asha -f json >asha.json &&
	dlt-search -q -c full.yaml -o full -f json >full.json &&
	a=$(epochs_trained asha) f=$(epochs_trained full) &&
	echo "asha $a epochs, full $f" &&
	test $f = 243 && test $((3 * a)) -le $f &&
	tail -1 asha/journal.jsonl | grep -q "^{\"event\":\"end\",\"best\":[0-9]*,\"epochs\":$a," &&
	test $(wc -l <asha.json) = 27 &&
	test $(grep -c "\"status\":\"done\"" asha.json) -ge 3 &&
	test $(grep -c "\"status\":\"done\"" asha.json) = $(grep -c "\"epochs\":9," asha.json) &&
	test $(grep -c "\"status\":\"stopped\"" asha.json) = $((27 - $(grep -c "\"epochs\":9," asha.json)))
'

test_expect_success 'asha: its best test accuracy is within 0.5 points of the best of all 27' '
	a=$(head -1 asha.json | sed "s/.*\"value\":\([0-9.]*\).*/\1/") &&
	f=$(head -1 full.json | sed "s/.*\"value\":\([0-9.]*\).*/\1/") &&
	echo "best test.acc: asha $a, full $f" &&
	perl -e "exit !(abs($a - $f) <= 0.005 && $f > 0.7)"
'

test_expect_success 'asha: a promoted trial is bit for bit the trial trained to 9 epochs at once' '
	best=$(printf %03d $(head -1 asha.json | sed "s/{\"trial\":\([0-9]*\),.*/\1/")) &&
	cmp asha/trials/$best/model.dlt full/trials/$best/model.dlt &&
	cmp asha/trials/$best/model.dlt asha/best.dlt &&
	test_cmp asha/trials/$best/config.yaml asha/best.yaml &&
	grep -q "^  epochs: 9$" asha/best.yaml &&
	grep -q "\"event\":\"resume\",\"epoch\":4,\"step\":114,\"epochs\":9," \
		asha/trials/$best/metrics.jsonl
'

test_expect_success 'asha: stopped trials keep their metrics, not their checkpoints' '
	stopped=$(printf %03d $(grep -m1 "\"status\":\"stopped\"" asha.json |
		sed "s/{\"trial\":\([0-9]*\),.*/\1/")) &&
	test ! -e asha/trials/$stopped/ckpt && test ! -e asha/trials/$stopped/model.dlt &&
	test -s asha/trials/$stopped/metrics.jsonl &&
	grep -q "\"event\":\"prune\",\"trial\":$(expr $stopped + 0)," asha/journal.jsonl
'

test_expect_success 'asha: -j 2 makes the decisions and leaderboard of -j 1' '
	dlt-search -c asha.yaml -o asha2 -j 2 --keep-checkpoints -f json >asha2.json 2>err &&
	test_cmp asha.json asha2.json &&
	decisions asha >d1 && decisions asha2 >d2 && test_cmp d1 d2 &&
	grep -q "\"event\":\"launch\",.*\"slot\":1," asha2/journal.jsonl &&
	grep -q "^dlt-search: trial 000 rung 0 (1 epoch): test.acc 0\.[0-9]*$" err &&
	grep -q "^dlt-search: trial [0-9]* promoted to rung 2 (9 epochs)$" err
'

test_expect_success 'asha: --keep-checkpoints keeps those of stopped trials' '
	stopped=$(printf %03d $(grep -m1 "\"status\":\"stopped\"" asha.json |
		sed "s/{\"trial\":\([0-9]*\),.*/\1/")) &&
	test -e asha2/trials/$stopped/ckpt && test -e asha2/trials/$stopped/model.dlt &&
	! grep -q "\"event\":\"prune\"" asha2/journal.jsonl
'

# kill_when DIR N: kill -9 the searcher $! once DIR's journal has N results
kill_when() {
	i=0
	until [ "$(cat $1/journal.jsonl 2>/dev/null | grep -c "\"event\":\"finish\"")" -ge $2 ]; do
		i=$((i + 1))
		[ $i -lt 600 ] || return 1
		sleep 0.05
	done
	kill -9 $!
}

# trials_left DIR: the dlt-train processes still training in DIR
trials_left() {
	ps -eo stat=,args= | grep -v "^Z" | grep "[d]lt-train .*$1/trials/" || true
}

# -j 3, one more than parallel: 2, to show that the leaderboard does not
# change with -j, nor with a kill and a resume.
test_expect_success 'kill -9 of the searcher: its trials stop too' '
	DLT_TEST_STEP_DELAY=0.003 dlt-search -q -c asha.yaml -o killed -j 3 -f json \
		>/dev/null 2>killed.err &
	kill_when killed 12 &&
	test "$(cat killed.err)" = "dlt-search: warning: -j 3 is more than parallel: 2 of asha.yaml; 1 slots stay idle" &&
	i=0 && while [ -n "$(trials_left killed)" ] && [ $i -lt 100 ]; do
		sleep 0.05; i=$((i + 1)); done &&
	trials_left killed >left && test ! -s left &&
	dlt-search status killed >st &&
	head -1 st | grep -q "^killed: asha, test.acc max, 27 trials, [0-9]* started, 0 running, [0-9]* epochs trained; stopped (dlt-search --resume)$" &&
	grep -q " paused " st
'

test_expect_success '--resume: finishes with the leaderboard of the uninterrupted search' '
	dlt-search --resume killed -q -f json >resumed.json 2>err &&
	test ! -s err &&
	test_cmp asha.json resumed.json &&
	decisions asha >d1 && decisions killed >d2 && test_cmp d1 d2 &&
	test $(grep -c "\"event\":\"resume\"" killed/journal.jsonl) = 1 &&
	sed -n "/\"event\":\"resume\"/,\$p" killed/journal.jsonl | grep -q "\"event\":\"launch\",.*\"resume\":true" &&
	trials_left killed >left && test ! -s left &&
	dlt-search status killed | head -1 | grep -q "; finished$"
'

test_expect_success '--resume: every trial trained to each rung once, every epoch once' '
	grep "\"event\":\"finish\"" asha/journal.jsonl | sed "s/.*\"trial\":\([0-9]*\),.*\"rung\":\([0-9]*\),.*/\1 \2/" | sort >f1 &&
	grep "\"event\":\"finish\"" killed/journal.jsonl | sed "s/.*\"trial\":\([0-9]*\),.*\"rung\":\([0-9]*\),.*/\1 \2/" | sort >f2 &&
	test_cmp f1 f2 && test -z "$(uniq -d f2)" &&
	test $(epochs_trained killed) = $(epochs_trained asha) &&
	for m in killed/trials/*/metrics.jsonl; do
		grep "\"split\":\"test\"" $m | grep -o "\"epoch\":[0-9]*" | uniq -d >dup &&
		test ! -s dup || return 1
	done &&
	cat killed/trials/*/metrics.jsonl | grep -c "\"event\":\"resume\",.*\"from\":\"killed/trials/[0-9]*/ckpt/step-[0-9]*.dlt\"" &&
	tail -1 killed/journal.jsonl | grep -q "^{\"event\":\"end\",\"best\":"
'

test_expect_success '--resume of a finished search prints its leaderboard again' '
	dlt-search --resume killed -f json >again.json &&
	test_cmp asha.json again.json &&
	test $(grep -c "\"event\":\"end\"" killed/journal.jsonl) = 1
'

test_expect_success 'status: a finished search, in json too' '
	dlt-search status asha >st &&
	head -1 st | grep -q "^asha: asha, test.acc max, 27 trials, 27 started, 0 running, $(epochs_trained asha) epochs trained; finished$" &&
	sed -n 2p st | grep -q "^trial  train.optimizer.adam.lr  model.1.dense  rung  epochs  test.acc  status  *exit$" &&
	sed -n 3p st | grep -q "^[0-9]*  .* 2  *9  *0\.[0-9]*  *done  *0$" &&
	dlt-search status -f json asha >st.json &&
	test $(wc -l <st.json) = 27 &&
	head -1 st.json | grep -q "^{\"trial\":[0-9]*,\"params\":{.*},\"rung\":2,\"epochs\":9,\"metric\":\"test.acc\",\"value\":0\.[0-9]*,\"status\":\"done\",\"exit\":0}$"
'

test_expect_success 'usage: resume, status, gpus, an asha param of train.epochs' '
	test_must_fail 2 "--resume takes the search" dlt-search --resume asha -c asha.yaml &&
	test_must_fail 2 "asha: a searcher runs there already" sh -c "flock asha/journal.jsonl dlt-search --resume asha" &&
	test_must_fail 2 "nosuch/journal.jsonl" dlt-search --resume nosuch &&
	test_must_fail 2 "status takes one search directory" dlt-search status &&
	test_must_fail 2 "--gpus: " dlt-search -c asha.yaml -o g --gpus 0,x &&
	test_must_fail 2 "--gpus-per-trial 2: 3 GPUs do not split into groups of 2" \
		dlt-search -c asha.yaml -o g --gpus 0,1,2 --gpus-per-trial 2 &&
	test_must_fail 2 "-j 3: --gpus has 2 slots of 1 GPUs" dlt-search -c asha.yaml -o g --gpus 0,1 -j 3 &&
	test_must_fail 2 "--gpus-per-trial needs --gpus" dlt-search -c asha.yaml -o g --gpus-per-trial 2 &&
	test_must_fail 2 "--retries: " dlt-search -c asha.yaml -o g --retries -1 &&
	{ cat asha.yaml && echo "  train.epochs: {choice: [2, 3]}"; } >epochs.yaml &&
	test_must_fail 2 "epochs.yaml:13: train.epochs: asha sets it (min_epochs, max_epochs)" \
		dlt-search -c epochs.yaml -o g &&
	test ! -e g
'

test_done

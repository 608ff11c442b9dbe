#!/bin/sh
# dlt-search: grid and random searches of a small MLP over real dlt-train
# trials; reproducible leaderboards; bad params found before any trial;
# a failing trial marked failed.
. "$(dirname "$0")/lib.sh"

blobs_csv >blobs.csv
mkdir cfg
cat >cfg/mlp.yaml <<'YAML'
data: {train: train.dlt, test: test.dlt}
model: [dense: 16, relu, dense: 3]
train: {epochs: 2, batch: 16, seed: 7, log_every: 10, optimizer: {adam: {lr: 1e-2}}}
YAML
cat >cfg/grid.yaml <<'YAML'
base: mlp.yaml
metric: test.acc
method: grid
params:
  train.optimizer.adam.lr: {choice: [1e-2, 1e-4]}
  model.0.dense: {choice: [8, 32]}
YAML
cat >cfg/random.yaml <<'YAML'
base: mlp.yaml
metric: test.loss
mode: min
method: random
trials: 5
seed: 42
params:
  train.optimizer.adam.lr: {loguniform: [1e-4, 1e-1]}
  model.0.dense: {int: [4, 64], log: true}
  train.batch: {choice: [8, 32]}
  data.val_split: {uniform: [0.05, 0.2]}
YAML

test_expect_success 'setup: data' '
	dlt-prep csv blobs.csv --label kind --shuffle --split 0.8 -o train.dlt -o test.dlt
'

test_expect_success 'grid: 2x2 choices run 4 trials with their overrides' '
	dlt-search -c cfg/grid.yaml -o g >out 2>err &&
	cat out err &&
	test $(grep -c "^dlt-search: trial 00[0-3] started: train.optimizer.adam.lr=[0-9.e-]* model.0.dense=[0-9]*$" err) = 4 &&
	test $(grep -c "^dlt-search: trial 00[0-3] rung 0 (2 epochs): test.acc [0-9.]*$" err) = 4 &&
	test $(wc -l <err) = 8 &&
	head -1 out | grep -q "^trial  *train.optimizer.adam.lr  *model.0.dense  *epochs  *test.acc  *status  *exit$" &&
	test $(wc -l <out) = 5 &&
	test $(grep -c " done  *0$" out) = 4 &&
	ls g/trials >got && printf "%s\n" 000 001 002 003 >want && test_cmp want got &&
	for t in 000:0.01:8 001:0.01:32 002:0.0001:8 003:0.0001:32; do
		n=${t%%:*} rest=${t#*:} &&
		grep -q "adam: {lr: ${rest%%:*}," g/trials/$n/config.yaml &&
		grep -q "^  - dense: {units: ${rest#*:}," g/trials/$n/config.yaml &&
		grep -q "threads: 2$" g/trials/$n/config.yaml || return 1
	done &&
	best=$(sed -n 2p out | cut -d" " -f1) &&
	test_cmp g/trials/$best/config.yaml g/best.yaml &&
	test $(grep -c "\"event\":\"start\"" g/journal.jsonl) = 4 &&
	test $(grep -c "\"event\":\"finish\",\"trial\":[0-3],\"status\":\"done\",\"exit\":0,\"epochs\":2,\"metric\":\"test.acc\",\"value\":[0-9.e-]*," g/journal.jsonl) = 4 &&
	grep -q "\"event\":\"start\",\"trial\":2,\"params\":{\"train.optimizer.adam.lr\":1e-4,\"model.0.dense\":8}" g/journal.jsonl &&
	tail -1 g/journal.jsonl | grep -q "^{\"event\":\"end\",\"best\":$(expr $best + 0),"
'

test_expect_success 'random: the same seed gives the same trials and leaderboard' '
	dlt-search -q -c cfg/random.yaml -o r1 >out1 2>err &&
	test ! -s err &&
	dlt-search -q -c cfg/random.yaml -o r2 >out2 &&
	cat out1 &&
	test $(wc -l <out1) = 6 &&
	test_cmp out1 out2 &&
	for n in 000 001 002 003 004; do
		grep -v "threads" r1/trials/$n/config.yaml >c1 &&
		grep -v "threads" r2/trials/$n/config.yaml >c2 &&
		test_cmp c1 c2 || return 1
	done &&
	sed "s/seed: 42/seed: 43/" cfg/random.yaml >cfg/random43.yaml &&
	dlt-search -c cfg/random43.yaml -o r3 >out3 &&
	! cmp -s out1 out3
'

test_expect_success 'random: -j 2 gives the leaderboard of -j 1, in csv and json too' '
	dlt-search -c cfg/random.yaml -o r4 -j 2 >out4 &&
	test_cmp out1 out4 &&
	grep -q "threads: 1$" r4/trials/000/config.yaml &&
	dlt-search -c cfg/random.yaml -o r5 -f csv >csv1 &&
	dlt-search -c cfg/random.yaml -o r6 -j 2 --format csv >csv2 &&
	test_cmp csv1 csv2 &&
	head -1 csv1 | grep -q "^trial,train.optimizer.adam.lr,model.0.dense,train.batch,data.val_split,epochs,test.loss,status,exit$" &&
	dlt-search -c cfg/random.yaml -o r7 -f json >json1 &&
	dlt-search -c cfg/random.yaml -o r8 -j 2 -f json >json2 &&
	test_cmp json1 json2 &&
	test $(wc -l <json1) = 5 &&
	grep -q "^{\"trial\":[0-4],\"params\":{\"train.optimizer.adam.lr\":[0-9.e-]*,\"model.0.dense\":[0-9]*,\"train.batch\":[0-9]*,\"data.val_split\":[0-9.e-]*},\"epochs\":2,\"metric\":\"test.loss\",\"value\":[0-9.e-]*,\"status\":\"done\",\"exit\":0}$" json1
'

test_expect_success 'a param key the config does not know: exit 2 before any trial' '
	cat >cfg/bad.yaml <<-\YAML &&
	base: mlp.yaml
	metric: test.acc
	method: grid
	params:
	  train.batch: {choice: [8, 16]}
	  train.optimizer.adam.rate: {choice: [0.1]}
	YAML
	test_must_fail 2 "cfg/bad.yaml:6: train.optimizer.adam.rate: " dlt-search -c cfg/bad.yaml -o bad &&
	test ! -e bad
'

test_expect_success 'bad search files name file:line, exit 2' '
	printf "base: mlp.yaml\nmetric: test.acc\nmethod: grid\nparams:\n  train.batch: {uniform: [8, 16]}\n" >cfg/b1.yaml &&
	test_must_fail 2 "cfg/b1.yaml:5: train.batch: grid needs choice or int params, not uniform" \
		dlt-search -c cfg/b1.yaml -o bad &&
	printf "base: mlp.yaml\nmetric: test.acc\nmethod: random\ntrials: 2\nparams:\n  train.batch: {choice: [8, 0]}\n" >cfg/b2.yaml &&
	test_must_fail 2 "cfg/b2.yaml:6: train.batch: " dlt-search -c cfg/b2.yaml -o bad &&
	printf "base: mlp.yaml\nmetric: test.acc\nmethod: bayes\n" >cfg/b3.yaml &&
	test_must_fail 2 "cfg/b3.yaml:3: method: expected grid, random or asha, got '\''bayes'\''" \
		dlt-search -c cfg/b3.yaml -o bad &&
	printf "base: nosuch.yaml\nmetric: test.acc\nmethod: grid\nparams: {train.batch: {choice: [8]}}\n" >cfg/b4.yaml &&
	test_must_fail 2 "cfg/b4.yaml:1: base: " dlt-search -c cfg/b4.yaml -o bad &&
	printf "base: mlp.yaml\nmetric: test.acc\nmethod: random\nparams:\n  train.batch: {loguniform: [0, 1]}\ntrials: 2\n" >cfg/b5.yaml &&
	test_must_fail 2 "cfg/b5.yaml:5: train.batch: loguniform: a log scale needs low > 0" \
		dlt-search -c cfg/b5.yaml -o bad &&
	printf "base: mlp.yaml\nmetric: test.acc\nmethod: random\nparams: {train.batch: {choice: [8]}}\n" >cfg/b6.yaml &&
	test_must_fail 2 "cfg/b6.yaml:1: missing trials" dlt-search -c cfg/b6.yaml -o bad &&
	test_must_fail 2 "-j: " dlt-search -c cfg/grid.yaml -o bad -j 0 &&
	test_must_fail 2 "missing -o DIR" dlt-search -c cfg/grid.yaml &&
	test ! -e bad
'

test_expect_success 'a trial that always fails is retried, then marked failed; the search finishes' '
	cat >cfg/fail.yaml <<-\YAML &&
	base: mlp.yaml
	metric: test.acc
	method: grid
	params:
	  data.train: {choice: [train.dlt, nosuch.dlt]}
	YAML
	dlt-search -q -c cfg/fail.yaml -o f --retries 2 >out 2>err &&
	cat out err &&
	grep -q "^000  *train.dlt  *2  *[0-9.]*  *done  *0$" out &&
	grep -q "^001  *nosuch.dlt  *0  *-  *failed  *2$" out &&
	test "$(cat err)" = "dlt-search: trial 001 failed (exit status 2), see f/logs/001.log" &&
	test $(grep -c "nosuch.dlt" f/logs/001.log) = 3 &&
	test $(grep -c "\"event\":\"launch\",\"trial\":1," f/journal.jsonl) = 3 &&
	grep -q "\"event\":\"retry\",\"trial\":1,\"job\":1,\"attempt\":1,\"exit\":2," f/journal.jsonl &&
	grep -q "\"event\":\"retry\",\"trial\":1,\"job\":1,\"attempt\":2,\"exit\":2," f/journal.jsonl &&
	grep -q "\"event\":\"finish\",\"trial\":1,\"status\":\"failed\",\"exit\":2,.*\"log\":\"dlt-train: .*nosuch.dlt" f/journal.jsonl &&
	test_cmp f/trials/000/config.yaml f/best.yaml &&
	dlt-search status -f json f >st &&
	grep -q "^{\"trial\":1,.*\"status\":\"failed\",\"exit\":2,\"log\":\"dlt-train: .*nosuch.dlt" st &&
	test_must_fail 2 "f: holds a search already" dlt-search -c cfg/fail.yaml -o f
'

test_expect_success 'status and --resume of a damaged journal: exit 2 naming file and line' '
	mkdir dj1 dj2 dj3 &&
	sed "1s/\"jobs\":1,/\"jobs\":0,/" f/journal.jsonl >dj1/journal.jsonl &&
	test_must_fail 2 "dlt-search: dj1/journal.jsonl:1: jobs 0: not a whole number from 1 to 1024" \
		dlt-search status dj1 &&
	test_must_fail 2 "dlt-search: dj1/journal.jsonl:1: jobs 0: not a whole number from 1 to 1024" \
		dlt-search --resume dj1 &&
	{ head -1 f/journal.jsonl && cat f/journal.jsonl; } >dj2/journal.jsonl &&
	test_must_fail 2 "dlt-search: dj2/journal.jsonl:2: a second search event" \
		dlt-search status dj2 &&
	sed "2s/\"trial\":0,/\"trial\":1e300,/" f/journal.jsonl >dj3/journal.jsonl &&
	test_must_fail 2 "dlt-search: dj3/journal.jsonl:2: trial 1e+300: not a whole number from -1 to 9007199254740992" \
		dlt-search --resume dj3 &&
	sed "2s/\"trial\":0,/\"trial\":1e300,/" f/journal.jsonl >want &&
	test_cmp want dj3/journal.jsonl
'

# DLT_TEST_STEP_DELAY makes the trial slow enough for a kill -9 to land in
# it; the search goes on with the trial from the checkpoint SIGTERM left.
test_expect_success 'a trial killed by a signal is retried from its checkpoint' '
	DLT_TEST_STEP_DELAY=0.02 dlt-search -q -c cfg/grid.yaml -o sig --retries 1 -f json >sig.json &
	i=0 && until grep -q "\"event\":\"launch\"" sig/journal.jsonl 2>/dev/null &&
		test -s sig/trials/000/ckpt/step-00000030.dlt 2>/dev/null; do
		i=$((i + 1)); [ $i -lt 400 ] || break; sleep 0.05; done &&
	pid=$(sed -n "s/.*\"event\":\"launch\",\"trial\":0,.*\"pid\":\([0-9]*\),.*/\1/p" sig/journal.jsonl) &&
	kill -9 $pid && wait $! &&
	grep -q "\"event\":\"retry\",\"trial\":0,\"job\":0,\"attempt\":1,\"exit\":137," sig/journal.jsonl &&
	grep -q "\"event\":\"resume\",\"epoch\":2,\"step\":30,\"from\":\"sig/trials/000/ckpt/step-00000030.dlt\"" sig/trials/000/metrics.jsonl &&
	dlt-search -q -c cfg/grid.yaml -o nosig -f json >nosig.json &&
	test_cmp nosig.json sig.json
'

# GPUs 7 and 9 are on no test machine: CUDA_VISIBLE_DEVICES hides every
# GPU from the trials, which fail as a CPU-only build does.
test_expect_success '--gpus: a slot per GPU, each trial on device cuda' '
	dlt-search -q -c cfg/grid.yaml -o gpu --gpus 7,9 -f json >gpu.json 2>err
	test $? = 1 &&
	tail -1 err | grep -q "^dlt-search: no trial gave test.acc$" &&
	test $(grep -c "\"status\":\"failed\",\"exit\":1," gpu.json) = 4 &&
	grep -q "\"event\":\"launch\",\"trial\":0,.*\"slot\":0," gpu/journal.jsonl &&
	grep -q "\"event\":\"launch\",\"trial\":1,.*\"slot\":1," gpu/journal.jsonl &&
	grep -q "\"jobs\":2," gpu/journal.jsonl &&
	grep -q "^dlt-train: no CUDA device" gpu/logs/000.log
'

test_done

#!/bin/sh
# dlt-train end to end on a small generated CSV dataset with string labels.
. "$(dirname "$0")/lib.sh"

blobs_csv >blobs.csv

cat >mlp.yaml <<'YAML'
data:
  train: train.dlt
  test: test.dlt
  val_split: 0.1
model:
  - dense: 32
  - relu
  - dropout: 0.1
  - dense: 3
train:
  epochs: 3
  batch: 16
  seed: 7
  log_every: 10
  optimizer: {adam: {lr: 1e-2}}
  schedule: {cosine: {warmup: 5}}
YAML

# drops the fields that measure time
untimed() {
	sed -e 's/,"\(samples_per_s\|train_time\|startup\|time\)":[^,}]*//g' "$1"
}

test_expect_success 'prepare a CSV with string labels' '
	dlt-prep csv blobs.csv --label kind --shuffle --split 0.8 -o train.dlt -o test.dlt &&
	test -f train.dlt && test -f test.dlt
'

test_expect_success 'train it to high accuracy' '
	dlt-train -c mlp.yaml -o run1 >out.txt &&
	grep "^test accuracy: " out.txt &&
	acc=$(sed -n "s/^test accuracy: //p" out.txt) &&
	perl -e "exit !($acc >= 0.95)"
'

test_expect_success 'the run directory holds config, metrics and status' '
	test -f run1/config.yaml && test -f run1/metrics.jsonl &&
	grep -q "\"status\":\"done\"" run1/status &&
	grep -q "^{\"event\":\"train\",\"epoch\":1,\"step\":10," run1/metrics.jsonl &&
	grep -q "^{\"event\":\"eval\",\"split\":\"val\",\"epoch\":3," run1/metrics.jsonl &&
	grep -q "^{\"event\":\"eval\",\"split\":\"test\",\"epoch\":3," run1/metrics.jsonl &&
	tail -n 1 run1/metrics.jsonl | grep -q "^{\"event\":\"done\",\"epoch\":3,\"step\":"
'

test_expect_success 'the same config twice gives the same metrics byte for byte' '
	dlt-train -c mlp.yaml -o run2 -q >/dev/null &&
	untimed run1/metrics.jsonl >m1 && untimed run2/metrics.jsonl >m2 &&
	test_cmp m1 m2 &&
	! grep -q samples_per_s m1
'

test_expect_success 'and the same weights byte for byte' '
	cmp run1/model.dlt run2/model.dlt &&
	dlt-prep info --json run1/model.dlt | grep -q "\"name\":\"0.w\""
'

test_expect_success 'another seed gives other metrics' '
	dlt-train -c mlp.yaml -o run3 -s train.seed=8 -q >/dev/null &&
	untimed run3/metrics.jsonl >m3 &&
	! cmp -s m1 m3
'

test_expect_success 'the resolved config.yaml trains the same run' '
	dlt-train -c run1/config.yaml -o run4 -q >/dev/null &&
	untimed run4/metrics.jsonl >m4 &&
	test_cmp m1 m4
'

test_expect_success '--json writes the metrics records to stdout' '
	dlt-train -c mlp.yaml -o run5 --json >json.out &&
	test_cmp run5/metrics.jsonl json.out
'

test_expect_success 'overrides change the model and the optimizer' '
	dlt-train -c mlp.yaml -o run6 -q -s model.0.dense=8 \
		-s "train.optimizer={sgd: {lr: 0.1, momentum: 0.9, nesterov: true}}" >/dev/null &&
	grep -q "dense: 8" run6/config.yaml || grep -q "units: 8" run6/config.yaml
'

test_expect_success 'no progress bar when stderr is not a terminal' '
	dlt-train -c mlp.yaml -o run7 >/dev/null 2>err.txt &&
	! grep -q ETA err.txt
'

test_expect_success 'a progress bar with samples/s and ETA on a terminal' '
	script -qec "dlt-train -c mlp.yaml -o run8 -q" /dev/null >tty.txt &&
	grep -q "epoch 3/3 \[=*\] 27/27 loss [0-9.]* [0-9]* samples/s ETA 0:00" tty.txt
'

test_expect_success 'a run directory that holds a run is refused' '
	test_must_fail 2 "run1: already holds a run" dlt-train -c mlp.yaml -o run1
'

test_expect_success 'an unknown config key names file and line' '
	sed "s/epochs: 3/epoch: 3/" mlp.yaml >bad.yaml &&
	test_must_fail 2 "bad.yaml:11: unknown key '\''epoch'\''" dlt-train -c bad.yaml -o badrun &&
	test ! -e badrun
'

test_expect_success 'an unknown layer names file and line' '
	sed "s/- relu/- relux/" mlp.yaml >bad2.yaml &&
	test_must_fail 2 "bad2.yaml:7: unknown layer '\''relux'\''" dlt-train -c bad2.yaml -o badrun &&
	test ! -e badrun
'

test_expect_success 'a bad -s value names the override' '
	test_must_fail 2 "-s train.batch=abc" dlt-train -c mlp.yaml -o badrun -s train.batch=abc &&
	test ! -e badrun
'

test_expect_success 'a missing config file' '
	test_must_fail 2 "nosuch.yaml: No such file or directory" dlt-train -c nosuch.yaml -o badrun
'

test_expect_success 'a missing dataset' '
	test_must_fail 2 "nosuch.dlt" dlt-train -c mlp.yaml -o badrun -s data.train=nosuch.dlt &&
	test ! -e badrun
'

test_expect_success 'a damaged dataset names the file' '
	cp train.dlt damaged.dlt &&
	size=$(wc -c <damaged.dlt) &&
	printf "\377" | dd of=damaged.dlt bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null &&
	test_must_fail 2 "damaged.dlt" dlt-train -c mlp.yaml -o badrun -s data.train=damaged.dlt &&
	test ! -e badrun
'

test_expect_success 'a model that does not end in one output per class' '
	test_must_fail 2 "3 classes" dlt-train -c mlp.yaml -o badrun -s model.3.dense=4 &&
	test ! -e badrun
'

test_expect_success 'a bad DLT_THREADS' '
	DLT_THREADS=abc && export DLT_THREADS &&
	test_must_fail 2 "DLT_THREADS" dlt-train -c mlp.yaml -o badrun
'

test_expect_success 'unknown options and missing values are usage errors' '
	test_must_fail 2 "unknown option '\''--tpus'\''" dlt-train -c mlp.yaml --tpus 2 &&
	test_must_fail 2 "option '\''-c'\'' needs a value" dlt-train -c &&
	test_must_fail 2 "option '\''--json'\'' takes no value" dlt-train -c mlp.yaml --json=1 &&
	test_must_fail 2 "unexpected argument '\''extra'\''" dlt-train -c mlp.yaml extra &&
	test ! -e runs
'

test_expect_success 'no config is a usage error' '
	test_must_fail 2 "no config" dlt-train -o badrun
'

test_expect_success 'a diverging run fails with status 1' '
	test_must_fail 1 "diverged" dlt-train -c mlp.yaml -o divrun -s train.optimizer.adam.lr=1e30 &&
	grep -q "\"status\":\"failed\"" divrun/status
'
test_done

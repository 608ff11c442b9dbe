#!/bin/sh
# dlt-runs on run directories of real dlt-train runs: two learning rates,
# and a run killed with kill -9 in its second epoch.
. "$(dirname "$0")/lib.sh"

blobs_csv >blobs.csv
cat >mlp.yaml <<'YAML'
data: {train: train.dlt, test: test.dlt, val_split: 0.1}
model: [dense: 32, relu, dense: 3]
train: {epochs: 3, batch: 16, seed: 7, log_every: 10, optimizer: {adam: {lr: 1e-2}}}
checkpoint: {best: test.acc}
YAML

# wait_for FILE PATTERN: until a line of FILE matches (at most 20 s)
wait_for() {
	i=0
	until grep -q "$2" "$1" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 400 ] || { echo "timed out waiting for $2 in $1"; return 1; }
		sleep 0.05
	done
}

# the row of run $1 in table output $2
row() {
	grep "^$1 " "$2"
}

test_expect_success 'setup: two runs, learning rates 1e-2 and 1e-4' '
	dlt-prep csv blobs.csv --label kind --shuffle --split 0.8 -o train.dlt -o test.dlt &&
	dlt-train -c mlp.yaml -o runs/fast -q >/dev/null &&
	dlt-train -c mlp.yaml -o runs/slow -s train.optimizer.adam.lr=1e-4 -q >/dev/null
'

test_expect_success 'setup: a run killed with kill -9 in epoch 2' '
	DLT_TEST_STEP_DELAY=0.02 dlt-train -c mlp.yaml -o runs/killed -q >/dev/null 2>&1 &
	pid=$! &&
	wait_for runs/killed/metrics.jsonl "\"epoch\":2" &&
	kill -9 $pid && ! wait $pid &&
	grep -q "\"status\":\"running\"" runs/killed/status &&
	mkdir -p runs/notes runs/empty/deeper && echo "lr sweep" >runs/notes/README
'

test_expect_success 'ls: a row a run, the killed one dead, other directories ignored' '
	dlt-runs ls >out 2>err &&
	test ! -s err &&
	cat out &&
	head -1 out | grep -q "^run  *status  *start  *duration  *epochs  *best:test.acc  *last:test.acc  *samples/s$" &&
	test $(wc -l <out) = 4 &&
	row runs/fast out | grep -q " done  .* 3/3 " &&
	row runs/slow out | grep -q " done  .* 3/3 " &&
	row runs/killed out | grep -q " dead  .* 2/3 " &&
	! grep -q "notes\|empty" out
'

test_expect_success 'ls: csv and json; DIR operands; the trials of a search found below' '
	mkdir -p search/trials && cp -r runs/fast search/trials/000 &&
	cp -r runs/slow search/trials/001 &&
	dlt-runs ls --format csv runs search >out &&
	head -1 out >head &&
	echo "run,status,start,duration,epoch,epochs,metric,best,last,samples_per_s,slurm_job,host" >want &&
	test_cmp want head &&
	cut -d, -f1,2,5,6,7 out | tail -n +2 >got &&
	printf "%s\n" runs/fast,done,3,3,test.acc runs/killed,dead,2,3,test.acc \
		runs/slow,done,3,3,test.acc search/trials/000,done,3,3,test.acc \
		search/trials/001,done,3,3,test.acc >want &&
	test_cmp want got &&
	dlt-runs ls -f json runs/ >out &&
	test $(wc -l <out) = 3 &&
	grep -q "^{\"run\":\"runs/killed\",\"status\":\"dead\",\"start\":\"[0-9T:-]*Z\",\"duration\":[0-9.e-]*,\"epoch\":2,\"epochs\":3,\"metric\":\"test.acc\",\"best\":[0-9.]*,\"last\":[0-9.]*,\"samples_per_s\":[0-9.e+]*,\"slurm_job\":null,\"host\":\"[^\"]*\"}$" out &&
	grep -q "\"run\":\"runs/slow\".*\"best\":0.[0-9]*," out
'

test_expect_success 'ls: --where on config keys, --status, --sort by a metric' '
	dlt-runs ls --where train.optimizer.adam.lr=1e-4 >out &&
	test $(wc -l <out) = 2 && row runs/slow out &&
	dlt-runs ls -w train.optimizer.adam.lr!=0.0001 -w train.batch=16 >out &&
	test $(wc -l <out) = 3 && ! grep -q runs/slow out &&
	dlt-runs ls --status done,failed >out &&
	test $(wc -l <out) = 3 && ! grep -q runs/killed out &&
	dlt-runs ls --status dead -f csv | cut -d, -f1 >out &&
	printf "run\nruns/killed\n" >want && test_cmp want out &&
	dlt-runs ls --sort test.acc | cut -d" " -f1 | tail -1 >out &&
	echo runs/slow >want && test_cmp want out &&
	dlt-runs ls --sort val.loss -r | cut -d" " -f1 | sed -n 2p >out &&
	test_cmp want out &&
	dlt-runs ls --sort test.loss | head -1 | grep -q "best:test.loss"
'

test_expect_success 'diff: of the config, only the learning rate; then the metrics' '
	dlt-runs diff runs/fast runs/slow >out &&
	cat out &&
	sed "/^$/q" out >config &&
	printf "%s\n" "config                   runs/fast  runs/slow" \
		"train.optimizer.adam.lr  0.01       0.0001" "" >want &&
	test_cmp want config &&
	grep -q "^metric  *runs/fast  *runs/slow$" out &&
	for m in train.loss train.acc val.acc test.loss test.acc; do
		for s in min max last; do
			grep -q "^$m $s  *[0-9.e-]*  *[0-9.e-]*$" out || { echo "no $m $s"; exit 1; }
		done
	done &&
	grep "^test.acc last" out | grep -q "  1  "
'

test_expect_success 'diff: the same config differs in nothing; a killed run only in metrics' '
	dlt-runs diff runs/fast runs/killed >out &&
	test -z "$(sed -n 2p out)" &&
	grep -q "^train.loss last  *[0-9.e-]*  *[0-9.e-]*$" out
'

test_expect_success 'best: the run with the better test accuracy, its best checkpoint' '
	dlt-runs best runs --metric test.acc >out &&
	echo runs/fast/ckpt/best.dlt >want && test_cmp want out &&
	dlt-ckpt verify "$(cat out)" &&
	dlt-runs best runs --metric test.acc --mode min --status done >out &&
	echo runs/slow/ckpt/best.dlt >want && test_cmp want out &&
	dlt-runs best runs -m loss -w train.optimizer.adam.lr=1e-4 >out &&
	test_cmp want out &&
	rm -r search/trials/000/ckpt &&
	dlt-runs best search >out &&
	echo search/trials/000/model.dlt >want && test_cmp want out &&
	rm search/trials/000/model.dlt &&
	test_must_fail 1 "dlt-runs: search/trials/000: no checkpoint" dlt-runs best search
'

test_expect_success 'plot: an SVG and a PNG, and the script next to them' '
	dlt-runs plot --metric loss,test.acc runs/fast runs/slow runs/killed -o curves.svg &&
	head -c 5 curves.svg | grep -q "^<?xml" && grep -q "<svg" curves.svg &&
	test $(wc -c <curves.svg) -gt 1024 &&
	for r in runs/fast runs/slow runs/killed; do
		grep -q "<text>$r</text>" curves.svg || { echo "no $r in the svg"; exit 1; }
	done &&
	grep -q "^set output .curves.svg.$" curves.gp &&
	dlt-runs plot --x epoch runs/fast runs/slow -o curves.png &&
	printf "\211PNG\r\n\032\n" >sig && head -c 8 curves.png >got && cmp sig got &&
	test $(wc -c <curves.png) -gt 1024 &&
	grep -q "^set xlabel .epoch.$" curves.gp &&
	rm curves.png && gnuplot curves.gp && test -s curves.png
'

test_expect_success 'plot: a text chart on a terminal, and with -o -' '
	script -qec "dlt-runs plot runs/fast runs/slow" /dev/null >tty.out &&
	grep -q "train.loss" tty.out && grep -q "test.acc" tty.out &&
	grep -q "runs/slow" tty.out && grep -q "+-----" tty.out &&
	dlt-runs plot -m val.loss --x time -o - runs/fast >out &&
	grep -q "val.loss" out && grep -q "time (s)" out
'

test_expect_success 'plot: without gnuplot, one line naming the package' '
	test_must_fail 1 "gnuplot-nox" env PATH="$BIN" "$BIN/dlt-runs" plot runs/fast -o x.svg &&
	test ! -f x.svg && test ! -f x.gp
'

test_expect_success 'a truncated last line of metrics.jsonl is skipped' '
	cp -r runs/slow cut &&
	printf "{\"event\":\"train\",\"epoch\":4,\"step\":90,\"lo" >>cut/metrics.jsonl &&
	dlt-runs ls . >out 2>err && test ! -s err &&
	row ./cut out | grep -q " 3/3 " &&
	dlt-runs diff runs/slow cut >out 2>err && test ! -s err &&
	test -z "$(sed -n 2p out)" &&
	grep "^train.loss last" out >last &&
	set -- $(cat last) && test "$3" = "$4" &&
	dlt-runs plot -m loss cut -o cut.svg 2>err && test ! -s err
'

test_expect_success 'damaged and wrong input: one line, exit 2' '
	test_must_fail 2 "dlt-runs: runs/notes: not a run directory (no metrics.jsonl)" \
		dlt-runs diff runs/fast runs/notes &&
	test_must_fail 2 "dlt-runs: nowhere: No such file or directory" \
		dlt-runs diff runs/fast nowhere &&
	cp -r runs/fast bad && sed -i "3s/.*/{\"event\":/" bad/metrics.jsonl &&
	test_must_fail 2 "dlt-runs: bad/metrics.jsonl:3: " dlt-runs diff runs/fast bad &&
	test_must_fail 2 "dlt-runs: bad/metrics.jsonl:3: " dlt-runs ls bad runs &&
	test $(wc -l <.stdout) = 4 && grep -q "^runs/slow " .stdout &&
	test_must_fail 2 "dlt-runs: diff takes two RUNs or more, got 1" dlt-runs diff runs/fast &&
	test_must_fail 2 "dlt-runs: nowhere: No such file or directory" dlt-runs ls nowhere &&
	test_must_fail 2 "dlt-runs: --format: '"'"'xml'"'"' is not table, csv or json" \
		dlt-runs ls -f xml &&
	test_must_fail 2 "dlt-runs: no run has metric '"'"'tset.acc'"'"'" dlt-runs ls --sort tset.acc &&
	test_must_fail 2 "dlt-runs: --where: no run has config key '"'"'train.bacth'"'"'" \
		dlt-runs ls -w train.bacth=16 &&
	test_must_fail 2 "dlt-runs: ls takes no --output" dlt-runs ls -o x.svg &&
	test_must_fail 2 "dlt-runs: -o: '"'"'x.jpg'"'"' does not end in .svg or .png" \
		dlt-runs plot runs/fast -o x.jpg &&
	test_must_fail 2 "dlt-runs: plot: give -o FILE.svg or FILE.png" dlt-runs plot runs/fast &&
	test_must_fail 2 "dlt-runs: unknown command '"'"'list'"'"'" dlt-runs list
'

test_done

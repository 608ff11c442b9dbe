#!/bin/sh
# dlt-runs and dlt-search on the metrics of every task: regression runs
# record rmse, mae and r2, multi-label runs acc and f1, all of them loss.
# Smaller is better for losses and errors, larger for the rest, by the
# name alone; the default metric is the task's.  The runs are written by
# hand, as dlt-train writes them.
. "$(dirname "$0")/lib.sh"

# mkrun DIR: a done run of two epochs, its records on stdin, a model.dlt
mkrun() {
	mkdir -p $1 &&
	printf 'train: {epochs: 2, batch: %s}\n' "${2:-16}" >$1/config.yaml &&
	printf '{"status":"done","pid":1,"host":"elsewhere","start":1700000000}\n' >$1/status &&
	: >$1/model.dlt &&
	cat >$1/metrics.jsonl
}

# regression RUN RMSE1 RMSE2 R2: train, val and test records of two epochs
regression() {
	mkrun runs/$1 <<-EOF
	{"event":"train","epoch":1,"step":10,"loss":2,"rmse":1.5,"mae":1.2,"r2":0.1,"time":1}
	{"event":"eval","split":"val","epoch":1,"step":10,"loss":2,"rmse":$2,"mae":1,"r2":0.2,"time":1.5}
	{"event":"train","epoch":2,"step":20,"loss":1,"rmse":1,"mae":0.8,"r2":0.3,"time":2}
	{"event":"eval","split":"val","epoch":2,"step":20,"loss":1,"rmse":$3,"mae":0.7,"r2":$4,"time":2.5}
	{"event":"eval","split":"test","epoch":2,"step":20,"loss":1,"rmse":$3,"mae":0.7,"r2":$4,"time":3}
	{"event":"done","step":20,"epoch":2,"time":3,"samples_per_s":100}
	EOF
}

test_expect_success 'setup: three regression runs' '
	regression a 0.9 0.5 0.4 &&
	regression b 0.8 0.3 0.7 &&
	regression c 1.1 0.7 0.2
'

test_expect_success 'ls: test.rmse by default, the smallest its best' '
	dlt-runs ls runs >out &&
	cat out &&
	head -1 out | grep -q "^run  *status  *start  *duration  *epochs  *best:test.rmse  *last:test.rmse  *samples/s$" &&
	grep -q "^runs/b  .* 0.3  *0.3  *100$" out &&
	dlt-runs ls -m val.rmse -f csv runs | cut -d, -f1,7,8,9 >got &&
	printf "%s\n" run,metric,best,last runs/a,val.rmse,0.5,0.5 runs/b,val.rmse,0.3,0.3 \
		runs/c,val.rmse,0.7,0.7 >want &&
	test_cmp want got
'

test_expect_success 'ls --sort: errors smallest first, r2 largest first' '
	dlt-runs ls --sort val.rmse runs | cut -d" " -f1 >got &&
	printf "%s\n" run runs/b runs/a runs/c >want &&
	test_cmp want got &&
	dlt-runs ls --sort val.rmse -r runs | cut -d" " -f1 >got &&
	printf "%s\n" run runs/c runs/a runs/b >want &&
	test_cmp want got &&
	dlt-runs ls --sort test.r2 runs | cut -d" " -f1 >got &&
	printf "%s\n" run runs/b runs/a runs/c >want &&
	test_cmp want got
'

test_expect_success 'best -m val.rmse: the smallest; --mode max the largest; r2 the largest' '
	dlt-runs best -m val.rmse runs >out &&
	echo runs/b/model.dlt >want && test_cmp want out &&
	dlt-runs best -m val.rmse --mode max runs >out &&
	echo runs/c/model.dlt >want && test_cmp want out &&
	dlt-runs best -m test.r2 runs >out &&
	echo runs/b/model.dlt >want && test_cmp want out &&
	dlt-runs best runs >out &&
	echo runs/b/model.dlt >want && test_cmp want out
'

test_expect_success 'multi-label: acc before f1; f1 when no run has acc' '
	mkrun ml/x <<-\EOF &&
	{"event":"eval","split":"val","epoch":1,"step":5,"loss":0.6,"f1":0.4,"time":1}
	{"event":"eval","split":"val","epoch":2,"step":10,"loss":0.5,"f1":0.6,"time":2}
	EOF
	mkrun ml/y <<-\EOF &&
	{"event":"eval","split":"val","epoch":1,"step":5,"loss":0.6,"f1":0.7,"time":1}
	{"event":"eval","split":"val","epoch":2,"step":10,"loss":0.5,"f1":0.5,"time":2}
	EOF
	dlt-runs ls ml | head -1 | grep -q " best:val.f1  *last:val.f1 " &&
	dlt-runs best ml >out &&
	echo ml/y/model.dlt >want && test_cmp want out &&
	mkrun ml/z <<-\EOF &&
	{"event":"eval","split":"val","epoch":1,"step":5,"loss":0.6,"acc":0.9,"f1":0.1,"time":1}
	EOF
	dlt-runs ls ml | head -1 | grep -q " best:val.acc  *last:val.acc " &&
	dlt-runs best ml >out &&
	echo ml/z/model.dlt >want && test_cmp want out
'

test_expect_success 'diff: min and max of every metric' '
	dlt-runs diff runs/a runs/b >out &&
	grep -q "^val.rmse min  *0.5  *0.3$" out &&
	grep -q "^val.rmse max  *0.9  *0.8$" out &&
	grep -q "^test.r2 max  *0.4  *0.7$" out
'

# A real search whose trials record no val.rmse writes its journal; the
# trials' values, put into that journal, make the leaderboard of status.
blobs_csv >blobs.csv
cat >mlp.yaml <<'YAML'
data: {train: train.dlt, test: test.dlt}
model: [dense: 4, dense: 3]
train: {epochs: 1, batch: 64, seed: 7, optimizer: {adam: {lr: 1e-2}}}
YAML
printf '%s\n' 'base: mlp.yaml' 'metric: val.rmse' 'method: grid' \
	'params: {train.batch: {choice: [32, 64, 128]}}' >rmse.yaml

test_expect_success 'search: metric val.rmse is min by default' '
	dlt-prep csv -q blobs.csv --label kind --split 0.8 -o train.dlt -o test.dlt &&
	test_must_fail 1 "dlt-search: no trial gave val.rmse" dlt-search -q -c rmse.yaml -o s &&
	grep -q "^{\"event\":\"search\",.*\"metric\":\"val.rmse\",\"mode\":\"min\"," s/journal.jsonl &&
	test $(grep -c "\"event\":\"finish\",.*\"value\":null," s/journal.jsonl) = 3 &&
	sed -e "/\"trial\":0,/s/\"value\":null/\"value\":0.5/" \
	    -e "/\"trial\":1,/s/\"value\":null/\"value\":0.25/" \
	    -e "/\"trial\":2,/s/\"value\":null/\"value\":0.75/" s/journal.jsonl >j &&
	mv j s/journal.jsonl &&
	dlt-search status s >out &&
	cat out &&
	head -1 out | grep -q "^s: grid, val.rmse min, 3 trials, 3 started, 0 running, 3 epochs trained; finished$" &&
	sed 1,2d out | cut -d" " -f1 >got &&
	printf "%s\n" 001 000 002 >want &&
	test_cmp want got &&
	dlt-search status -f csv s >out &&
	printf "%s\n" trial,train.batch,rung,epochs,val.rmse,status,exit 001,64,0,1,0.25,done,0 \
		000,32,0,1,0.5,done,0 002,128,0,1,0.75,done,0 >want &&
	test_cmp want out
'

test_expect_success 'search: mode max turns the leaderboard over' '
	printf "mode: max\n" >>rmse.yaml &&
	test_must_fail 1 "dlt-search: no trial gave val.rmse" dlt-search -q -c rmse.yaml -o m &&
	grep -q "\"metric\":\"val.rmse\",\"mode\":\"max\"," m/journal.jsonl
'

test_done

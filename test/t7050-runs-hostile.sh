#!/bin/sh
# dlt-runs and dlt-smi jobs on run directories whose metrics.jsonl and
# status hold numbers no run writes (huge, negative, fractional, pids that
# are no pids): they show what they can, exit 0, and convert nothing out of
# range (make check-asan runs this with UBSan's float-cast-overflow).
. "$(dirname "$0")/lib.sh"

host=$(hostname)
mkrun() {
	mkdir -p runs/$1 &&
	printf 'train: {epochs: %s}\n' "$2" >runs/$1/config.yaml &&
	printf '%s\n' "$3" >runs/$1/status &&
	cat >runs/$1/metrics.jsonl
}

test_expect_success 'huge and negative steps, epochs, times and pids' '
	mkrun huge 1e400 "{\"status\":\"running\",\"pid\":1e300,\"host\":\"$host\",\"start\":1e300,\"time\":-1}" <<-\EOF &&
	{"event":"train","epoch":1e300,"step":1e308,"loss":1e999,"acc":-1e308,"lr":1,"samples_per_s":1e308,"time":1e300}
	{"event":"train","epoch":2e300,"step":-1e308,"loss":0.5,"samples_per_s":-1,"time":-1e300}
	{"event":"eval","split":"test","epoch":1e300,"step":1e308,"loss":1,"acc":0.5,"time":1e308}
	EOF
	mkrun neg -5 "{\"status\":\"running\",\"pid\":-1,\"host\":\"$host\"}" <<-\EOF &&
	{"event":"train","epoch":-3,"step":-7.5,"loss":1,"time":0.5}
	{"event":"train","epoch":0.5,"step":3.25,"loss":1,"time":1e12}
	EOF
	mkrun wrap 2 "{\"status\":\"running\",\"pid\":4294967297,\"host\":\"$host\",\"start\":-5}" <<-\EOF &&
	{"event":"train","epoch":1,"step":1,"loss":1,"time":1}
	{"event":"train","epoch":1,"step":2,"loss":1,"time":1.0000001}
	EOF
	dlt-runs ls runs >ls.out 2>ls.err &&
	test ! -s ls.err && test $(wc -l <ls.out) = 4 &&
	dlt-runs ls -f csv runs >/dev/null &&
	dlt-runs ls -f json runs >/dev/null &&
	dlt-smi jobs --runs runs >jobs.out 2>jobs.err &&
	test ! -s jobs.err &&
	dlt-smi jobs --runs runs -f json >jobs.json &&
	dlt-smi jobs --runs runs -f csv >/dev/null
'

test_expect_success 'a pid that is no pid is unknown, not a live process' '
	grep -q "\"name\":\"neg\",\"status\":\"dead\"" jobs.json &&
	grep -q "\"name\":\"wrap\",\"status\":\"dead\"" jobs.json &&
	grep -q "\"name\":\"huge\",\"status\":\"dead\"" jobs.json
'

test_done

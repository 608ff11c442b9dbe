#!/bin/sh
# dlt-smi: the GPUs through a fake NVML (test/fake-nvml.c, two GPUs that
# answer and one that is lost; then GPUs that fail some queries), the jobs
# of a real dlt-train, and what it says where there is no driver.
. "$(dirname "$0")/lib.sh"

FAKE=$BUILD/test/libfake-nvml.so
DLT_FAKE_NVML=$TRASH/gpus.txt
export DLT_FAKE_NVML
unset DLT_NVML_LIBRARY DLT_RUNS

# GPU 0: fan unsupported (no "fan" line) and two processes; GPU 1 lost
cat >gpus.txt <<'EOF2'
gpu
name NVIDIA Fake H100 80GB
bus 00000000:3B:00.0
util 87
mutil 45
used 21474836480
total 85899345920
power 312456
limit 700000
temp 64
sm 1980
mem 2619
pstate 0
throttle 0x4
ecc 2
# pids above Linux's PID_MAX_LIMIT (4194304): no process on this machine has them
proc 4194401 1073741824
proc 4194402 536870912
gpu
lost
gpu
name NVIDIA Fake A100
bus 00000000:86:00.0
util 3
mutil 1
used 1048576
total 42949672960
power 55000
limit 400000
temp 31
sm 210
mem 1593
fan 30
pstate 8
throttle 0x1
ecc 0
EOF2

smi() {
	DLT_NVML_LIBRARY=$FAKE dlt-smi "$@"
}

test_expect_success 'table: the fake values, the lost GPU in its row, n/a' '
	smi >out &&
	grep -q "^GPU  NAME  .*  ECC  ERROR$" out &&
	grep -q "^0  *NVIDIA Fake H100 80GB  *00000000:3B:00.0  *87  *45  *20480  *81920  *312.456  *700  *64  *1980  *2619  *n/a  *P0  *0x4  *2$" out &&
	grep -q "^1  *ERR!  *ERR!  .*  ERR!  all queries: GPU is lost$" out &&
	grep -q "^2  *NVIDIA Fake A100  *00000000:86:00.0  *3  *1  *1  *40960  *55  *400  *31  *210  *1593  *30  *P8  *0x1  *0$" out &&
	grep -q "^0  *4194401  .*  1024$" out &&
	grep -q "^0  *4194402  .*  512$" out &&
	grep -q "load [0-9.]* [0-9.]* [0-9.]* ([0-9]* cpus)  memory [0-9]*/[0-9]* MiB used" out &&
	# no ERROR column where every GPU answered
	smi -i 2,0 >out &&
	grep -q "^GPU  NAME  .*  ECC$" out &&
	! grep -q "ERR" out
'

test_expect_success 'CSV: the fake values exactly' '
	smi --format csv | cut -d, -f2- >got &&
	cat >want <<-\EOF2 &&
	index,name,pci.bus_id,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,power.limit,temperature.gpu,clocks.sm,clocks.mem,fan.speed,pstate,clocks_throttle_reasons.active,ecc.errors,error
	0,NVIDIA Fake H100 80GB,00000000:3B:00.0,87,45,20480,81920,312.456,700,64,1980,2619,n/a,P0,0x4,2,
	1,,,,,,,,,,,,,,,,all queries: GPU is lost
	2,NVIDIA Fake A100,00000000:86:00.0,3,1,1,40960,55,400,31,210,1593,30,P8,0x1,0,
	EOF2
	test_cmp want got
'

test_expect_success 'JSON: the fake values exactly, processes, the lost GPU' '
	smi --format json >out &&
	test $(wc -l <out) = 1 &&
	grep -q "^{\"time\":[0-9.]*,\"host\":{\"load1\":" out &&
	sed -e "s/^.*,\"gpus\"/{\"gpus\"/" out >got &&
	cat >want <<-\EOF2 &&
	{"gpus":[{"index":0,"name":"NVIDIA Fake H100 80GB","pci.bus_id":"00000000:3B:00.0","utilization.gpu":87,"utilization.memory":45,"memory.used":20480,"memory.total":81920,"power.draw":312.456,"power.limit":700,"temperature.gpu":64,"clocks.sm":1980,"clocks.mem":2619,"fan.speed":null,"pstate":"P0","clocks_throttle_reasons.active":"0x4","ecc.errors":2,"processes":[{"pid":4194401,"name":"","memory.used":1024},{"pid":4194402,"name":"","memory.used":512}]},{"index":1,"error":"all queries: GPU is lost"},{"index":2,"name":"NVIDIA Fake A100","pci.bus_id":"00000000:86:00.0","utilization.gpu":3,"utilization.memory":1,"memory.used":1,"memory.total":40960,"power.draw":55,"power.limit":400,"temperature.gpu":31,"clocks.sm":210,"clocks.mem":1593,"fan.speed":30,"pstate":"P8","clocks_throttle_reasons.active":"0x1","ecc.errors":0,"processes":[]}],"jobs":[]}
	EOF2
	test_cmp want got
'

# GPU 0 fails its utilisation only, GPU 1 every query after its handle,
# GPU 2 its handle, GPU 3 three queries alike and two others differently
cat >failing.txt <<'EOF2'
gpu
name NVIDIA Fake H100 80GB
bus 00000000:3B:00.0
util 87
mutil 45
used 21474836480
total 85899345920
power 312456
limit 700000
temp 64
sm 1980
mem 2619
pstate 0
throttle 0x4
ecc 2
proc 4194401 1073741824
fail util
gpu
name NVIDIA Fake A100
bus 00000000:86:00.0
lost
gpu
fail handle
gpu
name NVIDIA Fake L4
bus 00000000:C1:00.0
util 12
mutil 4
used 1048576
total 24159191040
temp 45
fail power
fail limit
fail fan 10
fail proc 4
EOF2

test_expect_success 'table: a GPU failing a query shows what it answered, ERR! and why' '
	DLT_FAKE_NVML=failing.txt smi >out &&
	sed 1d out >got &&
	cat >want <<-\EOF2 &&

	GPU  NAME                   BUS-ID            UTIL%  MUTIL%  MEM-MiB  TOTAL-MiB  POWER-W  LIMIT-W  TEMP-C  SM-MHz  MEM-MHz  FAN%  PSTATE  THROTTLE   ECC  ERROR
	0    NVIDIA Fake H100 80GB  00000000:3B:00.0   ERR!    ERR!    20480      81920  312.456      700      64    1980     2619   n/a  P0      0x4          2  utilization: GPU is lost
	1    ERR!                   ERR!               ERR!    ERR!     ERR!       ERR!     ERR!     ERR!    ERR!    ERR!     ERR!  ERR!  ERR!    ERR!      ERR!  all queries: GPU is lost
	2    ERR!                   ERR!               ERR!    ERR!     ERR!       ERR!     ERR!     ERR!    ERR!    ERR!     ERR!  ERR!  ERR!    ERR!      ERR!  handle: GPU is lost
	3    NVIDIA Fake L4         00000000:C1:00.0     12       4        1      23040     ERR!     ERR!      45     n/a      n/a  ERR!  n/a     n/a        n/a  power.draw, power.limit: GPU is lost; fan.speed: timeout; processes: insufficient permissions

	GPU       PID  PROCESS                 MEM-MiB
	0     4194401  ?                          1024
	EOF2
	test_cmp want got &&
	# a string column last is padded only where an error follows
	DLT_FAKE_NVML=failing.txt smi -q index,name -i 3,0 | sed -n "3,5p" >got &&
	cat >want <<-\EOF2 &&
	GPU  NAME                   ERROR
	3    NVIDIA Fake L4         power.draw, power.limit: GPU is lost; fan.speed: timeout; processes: insufficient permissions
	0    NVIDIA Fake H100 80GB  utilization: GPU is lost
	EOF2
	test_cmp want got
'

test_expect_success 'CSV: failed fields empty, the rest and the error in its column' '
	DLT_FAKE_NVML=failing.txt smi --format csv | cut -d, -f2- >got &&
	cat >want <<-\EOF2 &&
	index,name,pci.bus_id,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,power.limit,temperature.gpu,clocks.sm,clocks.mem,fan.speed,pstate,clocks_throttle_reasons.active,ecc.errors,error
	0,NVIDIA Fake H100 80GB,00000000:3B:00.0,,,20480,81920,312.456,700,64,1980,2619,n/a,P0,0x4,2,utilization: GPU is lost
	1,,,,,,,,,,,,,,,,all queries: GPU is lost
	2,,,,,,,,,,,,,,,,handle: GPU is lost
	3,NVIDIA Fake L4,00000000:C1:00.0,12,4,1,23040,,,45,n/a,n/a,,n/a,n/a,n/a,"power.draw, power.limit: GPU is lost; fan.speed: timeout; processes: insufficient permissions"
	EOF2
	test_cmp want got
'

test_expect_success 'JSON: the fields that answered and an error naming the query' '
	DLT_FAKE_NVML=failing.txt smi --format json >out &&
	sed -e "s/^.*,\"gpus\"/{\"gpus\"/" out >got &&
	cat >want <<-\EOF2 &&
	{"gpus":[{"index":0,"name":"NVIDIA Fake H100 80GB","pci.bus_id":"00000000:3B:00.0","memory.used":20480,"memory.total":81920,"power.draw":312.456,"power.limit":700,"temperature.gpu":64,"clocks.sm":1980,"clocks.mem":2619,"fan.speed":null,"pstate":"P0","clocks_throttle_reasons.active":"0x4","ecc.errors":2,"processes":[{"pid":4194401,"name":"","memory.used":1024}],"error":"utilization: GPU is lost"},{"index":1,"error":"all queries: GPU is lost"},{"index":2,"error":"handle: GPU is lost"},{"index":3,"name":"NVIDIA Fake L4","pci.bus_id":"00000000:C1:00.0","utilization.gpu":12,"utilization.memory":4,"memory.used":1,"memory.total":23040,"temperature.gpu":45,"clocks.sm":null,"clocks.mem":null,"pstate":null,"clocks_throttle_reasons.active":null,"ecc.errors":null,"error":"power.draw, power.limit: GPU is lost; fan.speed: timeout; processes: insufficient permissions"}],"jobs":[]}
	EOF2
	test_cmp want got
'

test_expect_success '--query and -i pick fields and GPUs' '
	smi --format csv --query index,power.draw,fan.speed -i 2,0 | cut -d, -f2- >got &&
	printf "%s\n" index,power.draw,fan.speed,error 2,55,30, 0,312.456,n/a, >want &&
	test_cmp want got
'

test_expect_success '-l 1 -c 3: three samples a second apart, the header once' '
	smi --format csv -l 1 -c 3 -q index >out &&
	test $(grep -c "^time,index,error$" out) = 1 &&
	test $(grep -c ",0,$" out) = 3 &&
	grep ",0,$" out | cut -d, -f1 | awk "
		NR > 1 { d = \$1 - t; if (d < 0.8 || d > 1.5) { print \"apart: \" d; bad = 1 } }
		{ t = \$1 } END { exit bad }"
'

test_expect_success 'usage errors: one line, exit 2' '
	test_must_fail 2 "dlt-smi: --query: unknown field '\''watts'\''" smi -q watts &&
	test_must_fail 2 "dlt-smi: -i: no GPU 7 (this machine has 3)" smi -i 7 &&
	test_must_fail 2 "dlt-smi: -i" smi -i abc &&
	test_must_fail 2 "dlt-smi: -c" smi -c 0 &&
	test_must_fail 2 "dlt-smi: --format: '\''xml'\'' is not table, csv or json" smi -f xml &&
	test_must_fail 2 "dlt-smi: jobs takes no --query" smi jobs -q index &&
	test_must_fail 2 "dlt-smi: unknown command '\''gpus'\''" smi gpus
'

test_expect_success 'no driver: the message on stderr, exit 1' '
	test_must_fail 1 "dlt-smi: no NVIDIA driver: /nonexistent/libnvidia-ml.so.1 not found" \
		env DLT_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 dlt-smi --format csv &&
	if ldconfig -p 2>/dev/null | grep -q "libnvidia-ml\.so\.1 "; then
		echo "a driver is installed: the unset case is not checked"
	else
		test_must_fail 1 "dlt-smi: no NVIDIA driver: libnvidia-ml.so.1 not found" dlt-smi &&
		grep -q "load .* memory " .stdout &&
		test_must_fail 1 "dlt-smi: no NVIDIA driver: libnvidia-ml.so.1 not found" \
			dlt-smi --format json &&
		test ! -s .stdout
	fi
'

# a real training job, slowed down so that it runs while it is watched
blobs_csv >blobs.csv
cat >mlp.yaml <<'YAML'
data: {train: train.dlt, test: test.dlt, val_split: 0.1}
model: [dense: 32, relu, dense: 3]
train:
  epochs: 50
  batch: 16
  seed: 7
  log_every: 5
  optimizer: {adam: {lr: 1e-2}}
YAML

wait_for() {
	i=0
	until grep -q "$2" "$1" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 400 ] || { echo "timed out waiting for $2 in $1"; return 1; }
		sleep 0.05
	done
}

# field NAME: the numbers of "NAME": in the job objects of stdin, one a line
field() {
	sed -e "s/.*\"jobs\":\[//" | tr "{" "\n" | sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p"
}

test_expect_success 'jobs: a running dlt-train advances, and is on the GPU of its pid' '
	dlt-prep csv blobs.csv --label kind --shuffle --split 0.8 -o train.dlt -o test.dlt ||
		exit 1
	# alone after the list, so that $! is dlt-train, not a subshell
	DLT_TEST_STEP_DELAY=0.02 dlt-train -c mlp.yaml -o runs/mlp -q >/dev/null 2>&1 &
	echo $! >train.pid &&
	wait_for runs/mlp/metrics.jsonl "\"event\":\"eval\"" &&
	wait_for runs/mlp/metrics.jsonl "\"event\":\"train\",\"epoch\":2" &&
	dlt-smi jobs --format json -l 1 -c 2 >out &&
	test $(wc -l <out) = 2 &&
	grep -q "\"name\":\"mlp\",\"status\":\"running\",\"pid\":$(cat train.pid)," out &&
	field step <out >steps && field samples_per_s <out >rates &&
	test $(wc -l <steps) = 2 && test $(wc -l <rates) = 2 &&
	awk "NR == 1 { a = \$1 } NR == 2 { exit !(\$1 > a) }" steps &&
	awk "{ if (!(\$1 > 0)) exit 1 }" rates &&
	! cmp -s rates - <<-EOF2 &&
	$(head -1 rates)
	$(head -1 rates)
	EOF2
	field eta_s <out | awk "{ if (!(\$1 > 0)) exit 1; n++ } END { exit n != 2 }" &&
	grep -q "\"epochs\":50," out &&
	sed "s/^proc 4194402 .*/proc $(cat train.pid) 268435456/" gpus.txt >with-job.txt &&
	DLT_FAKE_NVML=with-job.txt smi --format json >out &&
	grep -q "\"name\":\"mlp\",\"status\":\"running\".*\"gpus\":\[0\]}" out &&
	DLT_FAKE_NVML=with-job.txt smi >table &&
	grep -q "^mlp  *running  *[0-9]*/50  *[0-9]*  *[0-9.]*  *[0-9.e-]*  *test.acc=[0-9.]*  *[0-9]*m[0-9]*s  *0$" table
'

test_expect_success 'jobs: after kill -9 the job reads dead' '
	kill -9 $(cat train.pid) && { wait $(cat train.pid) || :; } &&
	# the job was started by an earlier test: this shell cannot wait for
	# it, and on a busy machine it dies a moment after the signal
	i=0 &&
	until dlt-smi jobs --format json >out &&
		grep -q "\"name\":\"mlp\",\"status\":\"dead\"" out; do
		i=$((i + 1)) && test $i -lt 100 && sleep 0.05 || exit 1
	done &&
	grep -q "\"eta_s\":null" out &&
	dlt-smi jobs --runs runs --format csv >out &&
	grep -q "^[0-9.]*,mlp,dead,[0-9]*,50,[0-9]*," out &&
	dlt-smi jobs >out &&
	grep -q "^mlp  *dead " out
'

test_expect_success 'jobs works without NVML; DLT_RUNS and --runs name the directory' '
	mv runs elsewhere &&
	DLT_NVML_LIBRARY=/nonexistent dlt-smi jobs --format json >out &&
	grep -q "\"jobs\":\[\]" out &&
	DLT_RUNS=elsewhere dlt-smi jobs --format json | grep -q "\"name\":\"mlp\"" &&
	dlt-smi jobs --runs elsewhere --format json | grep -q "\"name\":\"mlp\"" &&
	test_must_fail 2 "dlt-smi: nothere" dlt-smi jobs --runs nothere
'

# the job, should a test above have failed before its kill
kill -9 $(cat train.pid 2>/dev/null) 2>/dev/null
test_done

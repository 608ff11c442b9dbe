#!/bin/sh
# Out of resources: a full disk, a read-only directory, an unwritable run
# directory, a missing dataset, a config too large for memory.  Each is a
# one-line message and exit status 1 (the job failed) or 2 (bad input),
# and leaves no file, whole or half written.
. "$(dirname "$0")/lib.sh"

blobs_csv >blobs.csv
# 20000 samples: a dataset of 400 KB, more than the full disk holds
perl -e 'print "a,b,c,d,y\n"; printf "%d,%d,%d,%d,%d\n", $_, $_ * 3, $_ % 7, $_ % 11, $_ % 3 for 1 .. 20000' >big.csv
cat >mlp.yaml <<'YAML'
data: {train: train.dlt, test: test.dlt}
model: [dense: 16, relu, dense: 3]
train: {epochs: 1, batch: 32, seed: 1}
YAML
dlt-prep csv -q -l kind --split 0.8 -o train.dlt -o test.dlt blobs.csv

# ns CMD ARGS...: CMD in a mount namespace of its own (unshare -m as root,
# -rm where user namespaces are allowed) where full/ is a tmpfs of 64 KiB
# and ro/ a read-only one; what CMD leaves in them is listed in left.
NS=
if unshare -m true 2>/dev/null; then
	NS="unshare -m"
elif unshare -rm true 2>/dev/null; then
	NS="unshare -rm"
fi
mkdir full ro
ns() {
	$NS sh -c 'mount -t tmpfs -o size=64k tmpfs full && mount -t tmpfs -o ro tmpfs ro ||
		exit 99
		"$@"; s=$?; ls -A full ro >left; exit $s' sh "$@"
}
# nothing left in full/ or ro/
none_left() {
	printf "full:\n\nro:\n" >empty && test_cmp empty left
}
if test -z "$NS"; then
	skip="# skip: no mount namespace (unshare -m, unshare -rm)"
	ns() { return 1; }
fi
test_ns() {
	if test -n "$NS"; then
		test_expect_success "$1" "$2"
	else
		test_count=$((test_count + 1))
		echo "ok $test_count $skip"
	fi
}

test_ns 'a full disk: dlt-prep fails (1) and leaves no file' '
	test_must_fail 1 "No space left on device" ns dlt-prep csv -q -l y -o full/big.dlt big.csv &&
	none_left
'

test_ns 'a full disk: dlt-prep with --split leaves neither part' '
	test_must_fail 1 "No space left on device" \
		ns dlt-prep csv -q -l y --split 0.5 -o full/a.dlt -o full/b.dlt big.csv &&
	none_left
'

# Training goes on past a checkpoint it cannot write (t2100), and fails
# at the model file; what it leaves is whole: no temporary file.
test_ns 'a full disk: dlt-train fails (1) at the model, no temporary file left' '
	ns sh -c "dlt-train -c mlp.yaml -q -o full/run -s model.0.dense=4000 2>err;
		s=\$?; ls -A full/run full/run/ckpt >list; exit \$s"
	test $? = 1 &&
	tail -1 err | grep -q "^dlt-train: full/run/model.dlt: No space left on device$" &&
	grep -q "^dlt-train: warning: checkpoint not written: .*No space left on device$" err &&
	! grep "^\." list
'

test_ns 'a full disk: dlt-ckpt export fails (1) and leaves no file' '
	dlt-train -c mlp.yaml -q -o run -s model.0.dense=4000 >/dev/null &&
	test_must_fail 1 "No space left on device" \
		ns dlt-ckpt export -f safetensors -o full/m.safetensors run/model.dlt &&
	none_left
'

test_ns 'a read-only directory: dlt-prep -o is bad usage (2), nothing written' '
	test_must_fail 2 "ro/x.dlt: Read-only file system" ns dlt-prep csv -q -l kind -o ro/x.dlt blobs.csv &&
	none_left
'

test_ns 'an unwritable run directory: dlt-train -o is bad usage (2)' '
	test_must_fail 2 "ro/run: Read-only file system" ns dlt-train -c mlp.yaml -q -o ro/run &&
	none_left
'

test_ns 'a read-only directory: dlt-infer -o is bad usage (2)' '
	test_must_fail 2 "ro/pred.csv: Read-only file system" \
		ns dlt-infer -m run/model.dlt -o ro/pred.csv test.dlt &&
	none_left
'

test_expect_success 'a run directory under a file: dlt-train -o is bad usage (2)' '
	echo x >afile &&
	test_must_fail 2 "afile/run: Not a directory" dlt-train -c mlp.yaml -q -o afile/run
'

test_expect_success 'a missing dataset: dlt-train exits 2 naming it, no run directory' '
	test_must_fail 2 "nosuch.dlt" dlt-train -c mlp.yaml -q -o miss -s data.train=nosuch.dlt &&
	test ! -e miss
'

test_expect_success 'a missing input: dlt-prep and dlt-infer exit 2 naming it' '
	test_must_fail 2 "nosuch.csv" dlt-prep csv -l y -o x.dlt nosuch.csv &&
	test_must_fail 2 "nosuch.dlt" dlt-infer -m run/model.dlt nosuch.dlt &&
	test ! -e x.dlt
'

test_expect_success 'a model too large for memory: exit 1, out of memory, no run directory' '
	test_must_fail 1 "out of memory: the model needs" dlt-train -c mlp.yaml -q -o huge \
		-s "model=[dense: 1000000000, relu, dense: 1000000000, dense: 3]" &&
	test ! -e huge
'

# A machine of 2 MiB (test/fake-mem.c): a stream stops at half of it,
# a model must fit in it.  ASan wants its runtime first of the libraries.
small_machine() {
	env LD_PRELOAD="$BUILD/test/libfake-mem.so" DLT_FAKE_PHYS_PAGES=$((2097152 / $(getconf PAGESIZE))) \
		ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" "$@"
}

test_expect_success 'an endless stream stops at half the memory: exit 2' '
	test_must_fail 2 "/dev/zero: larger than 1048576 bytes" small_machine dlt-prep info /dev/zero &&
	test_must_fail 2 "/dev/zero: larger than 1048576 bytes" \
		small_machine dlt-prep csv -l 0 -o x.dlt /dev/zero &&
	test_must_fail 2 "standard input: larger than 1048576 bytes" \
		small_machine sh -c "head -c 3000000 /dev/zero | dlt-prep info -" &&
	test ! -e x.dlt
'

test_expect_success 'a model larger than the memory: exit 1, what it needs and what there is' '
	test_must_fail 1 "out of memory: the model needs 49 MiB for a batch of 32, the machine has 2 MiB" \
		small_machine dlt-train -c mlp.yaml -q -o huge -s model.0.dense=100000 &&
	test ! -e huge
'

test_expect_success 'a dense layer of 1e12 units: exit 2, its limit named' '
	test_must_fail 2 "model.0.dense: must be <= 2147483647, got 1e12" \
		dlt-train -c mlp.yaml -q -o huge -s model.0.dense=1e12 &&
	test ! -e huge
'

test_done

#!/bin/sh
# The data path: data.train and data.test as lists of archives read as one
# dataset (the same bits as the one archive of their parts), archives that
# do not agree refused, and dlt-prep idx streaming a set it never holds.
. "$(dirname "$0")/lib.sh"
. "$DATA/prep/lib-prep.sh"

# a.idx: 300 6x6 images of 4 classes from a fixed LCG; b.idx: the same
# images and labels in another order; ab.idx: a's then b's.  b has a's
# pixel histogram and ab twice it, so all three archives get the same
# mean and std, and the list [a, b] is ab sample for sample, stats too.
perl -e '
	my $s = 4242;
	sub r { $s = ($s * 1103515245 + 12345) % 2147483648; return $s; }
	my $n = 300;
	my (@img, @lab);
	for (1 .. $n) {
		push @img, pack("C*", map { (r() >> 16) % 256 } 1 .. 36);
		push @lab, (r() >> 16) % 4;
	}
	my @perm = (0 .. $n - 1);
	for my $i (reverse 1 .. $n - 1) {
		my $j = (r() >> 16) % ($i + 1);
		@perm[$i, $j] = @perm[$j, $i];
	}
	sub out {
		my ($name, $k, $imgs, $labs) = @_;
		open(my $f, ">:raw", "$name.idx") or die;
		print $f pack("N4", 0x803, $k, 6, 6), @$imgs;
		open($f, ">:raw", "$name-lab.idx") or die;
		print $f pack("N2", 0x801, $k), pack("C*", @$labs);
	}
	my @bimg = @img[@perm];
	my @blab = @lab[@perm];
	out("a", $n, \@img, \@lab);
	out("b", $n, \@bimg, \@blab);
	out("ab", 2 * $n, [@img, @bimg], [@lab, @blab]);
	# c: other images (5x5); e: labels up to 5
	open(my $f, ">:raw", "c.idx") or die;
	print $f pack("N4", 0x803, 10, 5, 5), pack("C*", map { r() % 256 } 1 .. 250);
	open($f, ">:raw", "e-lab.idx") or die;
	print $f pack("N2", 0x801, $n), pack("C*", map { $_ % 6 } 0 .. $n - 1);
'
mkidx c-lab.idx 0x801 10 -- 0 1 2 3 0 1 2 3 0 1
for p in a b ab; do dlt-prep idx -q $p.idx $p-lab.idx -o $p.dlt; done
dlt-prep idx -q c.idx c-lab.idx -o c.dlt
dlt-prep idx -q a.idx e-lab.idx -o e.dlt
cat >list.yaml <<'YAML'
data:
  train: [a.dlt, b.dlt]
  test:
    - a.dlt
    - b.dlt
  val_split: 0.25
  augment: {crop: 1, flip: true}
model: [flatten, dense: 16, relu, dense: 4]
train: {epochs: 2, batch: 32, seed: 7, log_every: 5, optimizer: {adam: {lr: 1e-2}}}
YAML
sed 's/train: \[a.dlt, b.dlt\]/train: ab.dlt/; s/^    - a.dlt/    - ab.dlt/; /^    - b.dlt/d' \
	list.yaml >one.yaml

# the records without their timings
records() {
	sed 's/,"samples_per_s".*//; s/,"time".*//' "$1/metrics.jsonl" | grep -v '"event":"\(start\|done\)"'
}

test_expect_success 'the parts of the list have the stats of their concatenation' '
	for p in a b ab; do
		dlt-prep info --json $p.dlt >$p.json &&
		jget meta.mean <$p.json >$p.mean && jget meta.std <$p.json >$p.std || exit 1
	done &&
	test_cmp a.mean ab.mean && test_cmp b.mean ab.mean &&
	test_cmp a.std ab.std && test_cmp b.std ab.std &&
	grep -q "train: ab.dlt" one.yaml && grep -qx "    - ab.dlt" one.yaml
'

test_expect_success 'data.train as a list trains the weights of the one archive, bit for bit' '
	dlt-train -q -c list.yaml -o list >/dev/null &&
	dlt-train -q -c one.yaml -o one >/dev/null &&
	dlt-ckpt export --weights-only -f npy -o list.w list/model.dlt &&
	dlt-ckpt export --weights-only -f npy -o one.w one/model.dlt &&
	ls one.w | grep -q w.npy && diff -r one.w list.w &&
	records list >list.rec && records one >one.rec &&
	grep -q "\"split\":\"test\"" one.rec && grep -q "\"split\":\"val\"" one.rec &&
	test_cmp one.rec list.rec
'

test_expect_success 'config.yaml lists the archives; one path is written as before' '
	grep -qx "  train: \[a.dlt, b.dlt\]" list/config.yaml &&
	grep -qx "  test: \[a.dlt, b.dlt\]" list/config.yaml &&
	grep -qx "  train: ab.dlt" one/config.yaml &&
	grep -qx "  test: ab.dlt" one/config.yaml
'

test_expect_success 'a run of a list resumes, and goes on as the run of the one archive' '
	dlt-train -q --resume list -s train.epochs=3 >/dev/null &&
	dlt-train -q --resume one -s train.epochs=3 >/dev/null &&
	dlt-ckpt export --weights-only -f npy -o list3.w list/model.dlt &&
	dlt-ckpt export --weights-only -f npy -o one3.w one/model.dlt &&
	diff -r one3.w list3.w && ! diff -r one.w one3.w >/dev/null
'

test_expect_success '-s data.train=PATH replaces a list' '
	dlt-train -q -c list.yaml -o over -s data.train=ab.dlt -s train.epochs=1 >/dev/null &&
	grep -qx "  train: ab.dlt" over/config.yaml
'

test_expect_success 'class counts: the most of the archives' '
	printf "data: {train: [a.dlt, e.dlt]}\nmodel: [flatten, dense: 4]\n" >e4.yaml &&
	test_must_fail 2 "e4.yaml:2: the model ends with 4 features but the data has 6 classes" \
		dlt-train -q -c e4.yaml -o e4 &&
	printf "data: {train: [a.dlt, e.dlt]}\nmodel: [flatten, dense: 6]\n" >e6.yaml &&
	dlt-train -q -c e6.yaml -o e6 -s train.epochs=1 >/dev/null
'

test_expect_success 'archives that do not agree are refused, naming both' '
	printf "data: {train: [a.dlt, c.dlt]}\nmodel: [flatten, dense: 4]\n" >ac.yaml &&
	test_must_fail 2 "dlt-train: c.dlt: samples of u8 [1, 5, 5], but a.dlt has samples of u8 [1, 6, 6]" \
		dlt-train -q -c ac.yaml -o bad &&
	test_must_fail 2 "dlt-train: c.dlt: samples of u8 [1, 5, 5], but a.dlt has samples of u8 [1, 6, 6]" \
		dlt-train -q -c list.yaml -o bad -s "data.test=[a.dlt, c.dlt]" &&
	printf "x,y,t\n1,2,0\n3,4,1\n5,6,0\n7,8,1\n" >k.csv &&
	printf "x,y\n1,2\n3,4\n" >u.csv &&
	dlt-prep csv -q k.csv -l t -o k.dlt &&
	dlt-prep csv -q k.csv --target t -o t.dlt &&
	dlt-prep csv -q k.csv --labels t -o m.dlt &&
	dlt-prep csv -q u.csv -l none -o u.dlt &&
	printf "data: {train: [k.dlt, t.dlt]}\nmodel: [dense: 2]\n" >kt.yaml &&
	test_must_fail 2 "dlt-train: t.dlt: 1 float target, but k.dlt has class ids" \
		dlt-train -q -c kt.yaml -o bad &&
	printf "data: {train: [t.dlt, m.dlt]}\nmodel: [dense: 1]\n" >tm.yaml &&
	test_must_fail 2 "dlt-train: m.dlt: 1 0/1 label, but t.dlt has 1 float target" \
		dlt-train -q -c tm.yaml -o bad &&
	printf "data: {train: [k.dlt, u.dlt]}\nmodel: [dense: 2]\n" >ku.yaml &&
	test_must_fail 2 "dlt-train: u.dlt: no targets, but k.dlt has class ids" \
		dlt-train -q -c ku.yaml -o bad &&
	printf "data: {train: [k.dlt, a.dlt]}\nmodel: [dense: 2]\n" >ka.yaml &&
	test_must_fail 2 "dlt-train: a.dlt: samples of u8 [1, 6, 6], but k.dlt has samples of f32 [2]" \
		dlt-train -q -c ka.yaml -o bad &&
	printf "data: {train: []}\nmodel: [dense: 2]\n" >none.yaml &&
	test_must_fail 2 "none.yaml:1: data.train: must list at least one archive" \
		dlt-train -q -c none.yaml -o bad &&
	printf "data: {train: [k.dlt, {a: 1}]}\nmodel: [dense: 2]\n" >map.yaml &&
	test_must_fail 2 "map.yaml:1: data.train[1]: expected a path, got a mapping" \
		dlt-train -q -c map.yaml -o bad &&
	test_must_fail 2 "nosuch.dlt" dlt-train -q -c list.yaml -o bad \
		-s data.test=nosuch.dlt &&
	! test -e bad
'

# peak_kib CMD...: the command's peak resident set (VmHWM, KiB), from wait4
peak_kib() {
	python3 -c '
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, st, ru = os.wait4(pid, 0)
print(ru.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(st))' "$@"
}

test_expect_success 'dlt-prep idx streams: 60000 images never all in memory' '
	command -v python3 >/dev/null || { echo "# skip: no python3"; return 0; }
	perl -e "
		open(my \$f, \">:raw\", \"big.idx\") or die;
		print \$f pack(\"N4\", 0x803, 60000, 28, 28);
		my \$img = pack(\"C*\", map { (\$_ * 7) % 256 } 0 .. 783);
		print \$f \$img for 1 .. 60000;
		open(\$f, \">:raw\", \"big-lab.idx\") or die;
		print \$f pack(\"N2\", 0x801, 60000), pack(\"C*\", map { \$_ % 10 } 1 .. 60000);
	" &&
	small=$(peak_kib dlt-prep idx -q a.idx a-lab.idx -o small.dlt) &&
	big=$(peak_kib dlt-prep idx -q big.idx big-lab.idx -o big.dlt) &&
	echo "peak RSS: $small KiB for 300 images, $big KiB for 60000 (47 MB of pixels)" &&
	test "$big" -lt $((small + 24 * 1024)) &&
	dlt-prep idx -q big.idx big-lab.idx -o - >stdout.dlt &&
	test_cmp big.dlt stdout.dlt &&
	tensor_bytes big.dlt x | cmp - big.idx 0 16 &&
	dlt-prep info --json big.dlt >big.json &&
	test "$(jget meta.n <big.json)" = 60000 &&
	gzip -1c big.idx >big.idx.gz &&
	dlt-prep idx -q big.idx.gz big-lab.idx -o gz.dlt &&
	test_cmp big.dlt gz.dlt
'

test_expect_success 'dlt-prep idx reads into memory to shuffle or split, with the same stats' '
	dlt-prep idx -q ab.idx ab-lab.idx --codec zstd -o z.dlt &&
	dlt-prep info --json z.dlt >z.json && jget meta.std <z.json >z.std &&
	test_cmp ab.std z.std &&
	tensor_bytes z.dlt x >z.x && tensor_bytes ab.dlt x >ab.x && test_cmp ab.x z.x
'

test_done

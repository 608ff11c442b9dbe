#!/bin/sh
# dlt-prep info: what a dataset archive holds, as text and as JSON.
. "$(dirname "$0")/lib.sh"
. "$DATA/prep/lib-prep.sh"

cat >iris.csv <<'CSV'
sepal,petal,species
1,0,setosa
3,4,virginica
1,0,versicolor
3,4,setosa
CSV
dlt-prep csv iris.csv --label species --codec zstd -o d.dlt

# The text with what depends on the zstd version masked: the file size and
# the stored sizes.
mask() {
	sed -E -e 's/^file: (.*) \([0-9]+ bytes\)$/file: \1 (N bytes)/' \
		-e '/^  [xy] /s/ +[0-9]+$/  S/'
}

test_expect_success 'info: tensors, metadata and samples per class' '
	cat >want.txt <<-\TXT &&
	file: d.dlt (N bytes)
	tensors:
	  name  dtype  shape   codec           raw        stored
	  x     f32    [4, 2]  zstd             32  S
	  y     i32    [4]     raw              16  S
	kind: dataset
	source: csv
	n: 4
	shape: [2]
	num_classes: 3
	scale: 1
	mean: [2, 2]
	std: [1, 2]
	classes:
	     id     samples  name
	      0           2  setosa
	      1           1  versicolor
	      2           1  virginica
	TXT
	dlt-prep info d.dlt | mask >got.txt &&
	test_cmp want.txt got.txt
'

test_expect_success 'info --json: one object with file, size, tensors, meta, counts' '
	dlt-prep info --json d.dlt >info.json &&
	test $(wc -l <info.json) = 1 &&
	test "$(jget file <info.json)" = "\"d.dlt\"" &&
	test "$(jget size <info.json)" = $(wc -c <d.dlt) &&
	test "$(jget tensors.0 <info.json | sed "s/\"stored_size\":[0-9]*/S/")" = \
		"{\"codec\":\"zstd\",\"dtype\":\"f32\",\"name\":\"x\",\"raw_size\":32,\"shape\":[4,2],S}" &&
	test "$(jget tensors.1.raw_size <info.json)" = 16 &&
	test "$(jget meta <info.json)" = "{\"classes\":[\"setosa\",\"versicolor\",\"virginica\"],\"kind\":\"dataset\",\"mean\":[2,2],\"n\":4,\"num_classes\":3,\"scale\":1,\"shape\":[2],\"source\":\"csv\",\"std\":[1,2]}" &&
	test "$(jget counts <info.json)" = "[2,1,1]" &&
	test "$(jget tensors.2 <info.json)" = null
'

test_expect_success 'info -: reads the archive from stdin' '
	dlt-prep info d.dlt | sed 1d >file.txt &&
	dlt-prep info - <d.dlt | sed 1d >stdin.txt &&
	test_cmp file.txt stdin.txt &&
	dlt-prep info - <d.dlt | grep -q "^file: standard input (" &&
	test "$(dlt-prep info --json - <d.dlt | jget file)" = "\"-\""
'

test_expect_success 'info: a pipe from dlt-prep csv -o -' '
	dlt-prep csv iris.csv --label 2 -o - | dlt-prep info --json - >info.json &&
	test "$(jget meta.n <info.json)" = 4 &&
	test "$(jget counts <info.json)" = "[2,1,1]"
'

test_expect_success 'info: damaged labels are an error, not wrong counts' '
	perl -0777 -pe "
		my \$y = pack(q(l<*), 0, 2, 1, 0);
		my \$at = index(\$_, \$y);
		die q(labels not found) if \$at < 0;
		substr(\$_, \$at + 4, 1) = chr(1);
	" d.dlt >bad.dlt &&
	test_must_fail 2 "bad.dlt: checksum mismatch in tensor '"'"'y'"'"'" dlt-prep info bad.dlt
'

test_expect_success 'info: not an archive, truncated, missing' '
	test_must_fail 2 "iris.csv: not a dlt archive" dlt-prep info iris.csv &&
	head -c 100 d.dlt >short.dlt &&
	test_must_fail 2 "short.dlt: truncated" dlt-prep info short.dlt &&
	test_must_fail 2 "nosuch.dlt: No such file or directory" dlt-prep info nosuch.dlt
'
test_expect_success 'the codec: raw by default, as --codec asks, an unknown one refused' '
	dlt-prep csv iris.csv --label species -q -o raw.dlt &&
	dlt-prep info raw.dlt | grep -q "^  x     f32    \[4, 2\]  raw " &&
	dlt-prep csv iris.csv --label species -q --codec shuffle-zstd -o sz.dlt &&
	dlt-prep info --json sz.dlt | grep -q "\"name\":\"x\",\"dtype\":\"f32\",\"shape\":\[4,2\],\"codec\":\"shuffle-zstd\"" &&
	test_must_fail 2 "dlt-prep: --codec: unknown codec '"'"'lz4'"'"' (raw, zstd, shuffle-zstd)" \
		dlt-prep csv iris.csv --label species --codec lz4 -o x.dlt
'

test_done

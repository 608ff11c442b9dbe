#!/bin/sh
# dlt-prep: help, version, and every kind of bad command line: one line on
# stderr, status 2, no file written.
. "$(dirname "$0")/lib.sh"
. "$DATA/prep/lib-prep.sh"

mkidx img.idx 0x803 6 1 1 -- 1 2 3 4 5 6
mkidx lab.idx 0x801 6 -- 0 1 0 1 0 1
printf "a,b,y\n1,2,0\n3,4,1\n" >d.csv
mkdir out

test_expect_success '-h prints the usage on stdout, in any position' '
	dlt-prep -h >help.txt &&
	head -1 help.txt | grep -q "^usage: dlt-prep idx " &&
	grep -q -- "--split F" help.txt &&
	dlt-prep csv --help >help2.txt &&
	test_cmp help.txt help2.txt
'

test_expect_success '--version' '
	test "$(dlt-prep --version)" = "dlt-prep 0.1.0"
'

test_expect_success 'bad usage: commands and operands' '
	test_must_fail 2 "missing command" dlt-prep &&
	test_must_fail 2 "missing command" dlt-prep -q &&
	test_must_fail 2 "unknown command '"'"'mnist'"'"'" dlt-prep mnist img.idx &&
	test_must_fail 2 "idx takes IMAGES and LABELS, got 1 operand" \
		dlt-prep idx img.idx -o out/d.dlt &&
	test_must_fail 2 "csv takes one FILE, got 2 operands" \
		dlt-prep csv d.csv d.csv --label y -o out/d.dlt &&
	test_must_fail 2 "info takes one FILE, got 0 operands" dlt-prep info &&
	is_empty out
'

test_expect_success 'bad usage: unknown options and missing values' '
	test_must_fail 2 "unknown option '"'"'--shufle'"'"'" \
		dlt-prep idx img.idx lab.idx --shufle -o out/d.dlt &&
	test_must_fail 2 "unknown option '"'"'-x'"'"'" dlt-prep idx img.idx lab.idx -x -o out/d.dlt &&
	test_must_fail 2 "option '"'"'-o'"'"' needs a value" dlt-prep idx img.idx lab.idx -o &&
	test_must_fail 2 "option '"'"'--seed'"'"' needs a value" dlt-prep idx img.idx lab.idx --seed &&
	test_must_fail 2 "option '"'"'--shuffle'"'"' takes no value" \
		dlt-prep idx img.idx lab.idx --shuffle=1 -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad usage: numbers' '
	test_must_fail 2 "--split: expected a number, got '"'"'abc'"'"'" \
		dlt-prep idx img.idx lab.idx --split abc -o out/a.dlt -o out/b.dlt &&
	test_must_fail 2 "--split: 1.5 is not between 0 and 1" \
		dlt-prep idx img.idx lab.idx --split 1.5 -o out/a.dlt -o out/b.dlt &&
	test_must_fail 2 "--split: 0 is not between 0 and 1" \
		dlt-prep idx img.idx lab.idx --split 0 -o out/a.dlt -o out/b.dlt &&
	test_must_fail 2 "--split: 1 is not between 0 and 1" \
		dlt-prep idx img.idx lab.idx --split 1 -o out/a.dlt -o out/b.dlt &&
	test_must_fail 2 "--split: nan is not a finite number" \
		dlt-prep idx img.idx lab.idx --split nan -o out/a.dlt -o out/b.dlt &&
	test_must_fail 2 "--seed: -1 is out of range" \
		dlt-prep idx img.idx lab.idx --shuffle --seed -1 -o out/d.dlt &&
	test_must_fail 2 "--seed: expected an integer, got '"'"'1.5'"'"'" \
		dlt-prep idx img.idx lab.idx --shuffle --seed 1.5 -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad usage: outputs' '
	test_must_fail 2 "missing -o OUT" dlt-prep idx img.idx lab.idx &&
	test_must_fail 2 "--seed needs --shuffle" dlt-prep idx img.idx lab.idx --seed 3 -o out/d.dlt &&
	test_must_fail 2 "--split needs a second -o for the rest" \
		dlt-prep idx img.idx lab.idx --split 0.5 -o out/a.dlt &&
	test_must_fail 2 "a second -o needs --split" \
		dlt-prep idx img.idx lab.idx -o out/a.dlt -o out/b.dlt &&
	test_must_fail 2 "at most two -o" \
		dlt-prep idx img.idx lab.idx --split 0.5 -o out/a.dlt -o out/b.dlt -o out/c.dlt &&
	test_must_fail 2 "only one output can be standard output" \
		dlt-prep idx img.idx lab.idx --split 0.5 -o - -o - &&
	test_must_fail 2 "split 0.01 of 6 samples leaves one part empty" \
		dlt-prep idx img.idx lab.idx --split 0.01 -o out/a.dlt -o out/b.dlt &&
	test_must_fail 2 "nodir/d.dlt: No such file or directory" \
		dlt-prep idx img.idx lab.idx -o nodir/d.dlt &&
	is_empty out
'

test_expect_success 'bad usage: options of another command' '
	test_must_fail 2 "csv needs --label COL" dlt-prep csv d.csv -o out/d.dlt &&
	test_must_fail 2 "--label, --header and --no-header apply to csv only" \
		dlt-prep idx img.idx lab.idx --label 0 -o out/d.dlt &&
	test_must_fail 2 "--json applies to info only" \
		dlt-prep idx img.idx lab.idx --json -o out/d.dlt &&
	test_must_fail 2 "info takes only --json and FILE" dlt-prep info -o out/d.dlt d.csv &&
	is_empty out
'

test_expect_success 'no summary on stderr when it is not a terminal' '
	dlt-prep idx img.idx lab.idx -o d.dlt 2>err.txt &&
	test ! -s err.txt
'
test_done

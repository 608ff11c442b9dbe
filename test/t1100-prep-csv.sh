#!/bin/sh
# dlt-prep csv: numeric CSV with a label column into a dataset archive;
# headers, quoting, line ends, string labels, stats; bad input.
. "$(dirname "$0")/lib.sh"
. "$DATA/prep/lib-prep.sh"

# sepal: 1 3 1 3 (mean 2, std 1); petal: 0 4 0 4 (mean 2, std 2)
cat >iris.csv <<'EOF'
sepal,petal,species
1,0,setosa
3,4,virginica
1,0,versicolor
3,4,setosa
EOF
mkdir out

test_expect_success 'csv: x f32 [N,F] without the label column, y i32 [N]' '
	dlt-prep csv iris.csv --label species -o d.dlt &&
	dlt-prep info --json d.dlt >info.json &&
	test "$(jget tensors.0.dtype <info.json)" = "\"f32\"" &&
	test "$(jget tensors.0.shape <info.json)" = "[4,2]" &&
	test "$(jget tensors.1.shape <info.json)" = "[4]" &&
	test "$(jget meta.source <info.json)" = "\"csv\"" &&
	test "$(jget meta.n <info.json)" = 4 &&
	test "$(jget meta.shape <info.json)" = "[2]" &&
	tensor_bytes d.dlt x >x.bin &&
	perl -e "print pack(q(f<*), 1, 0, 3, 4, 1, 0, 3, 4)" >want.bin &&
	test_cmp want.bin x.bin
'

test_expect_success 'csv: string labels become classes, sorted, ids in that order' '
	dlt-prep info --json d.dlt >info.json &&
	test "$(jget meta.num_classes <info.json)" = 3 &&
	test "$(jget meta.classes <info.json)" = "[\"setosa\",\"versicolor\",\"virginica\"]" &&
	test "$(jget counts <info.json)" = "[2,1,1]" &&
	tensor_bytes d.dlt y >y.bin &&
	perl -e "print pack(q(l<*), 0, 2, 1, 0)" >want.bin &&
	test_cmp want.bin y.bin
'

test_expect_success 'csv: scale 1, population mean and std per column' '
	dlt-prep info --json d.dlt >info.json &&
	test "$(jget meta.scale <info.json)" = 1 &&
	test "$(jget meta.mean <info.json)" = "[2,2]" &&
	test "$(jget meta.std <info.json)" = "[1,2]"
'

test_expect_success 'csv: a constant column gets its value as mean and std 1' '
	printf "a,b,y\n0.1,1,0\n0.1,2,1\n0.1,6,0\n" >const.csv &&
	dlt-prep csv const.csv --label y -o c.dlt &&
	dlt-prep info --json c.dlt >info.json &&
	approx "$(jget meta.mean.0 <info.json)" 0.100000001490116 &&
	test "$(jget meta.std.0 <info.json)" = 1 &&
	approx "$(jget meta.mean.1 <info.json)" 3 &&
	approx "$(jget meta.std.1 <info.json)" "$(perl -e "print sqrt(14 / 3)")"
'

test_expect_success 'csv: integer labels are the class ids; no header, label by index' '
	printf "5,1.5,0.5\n2,2.5,1.5\n5,3.5,2.5\n" >ids.csv &&
	dlt-prep csv ids.csv --label 0 -o i.dlt &&
	dlt-prep info --json i.dlt >info.json &&
	test "$(jget meta.n <info.json)" = 3 &&
	test "$(jget meta.num_classes <info.json)" = 6 &&
	test "$(jget meta.classes <info.json)" = null &&
	test "$(jget counts <info.json)" = "[0,0,1,0,0,2]" &&
	test "$(jget meta.mean <info.json)" = "[2.5,1.5]" &&
	tensor_bytes i.dlt y >y.bin &&
	perl -e "print pack(q(l<*), 5, 2, 5)" >want.bin &&
	test_cmp want.bin y.bin
'

test_expect_success 'csv: label by index with a header, and in the middle' '
	dlt-prep csv iris.csv --label 2 -o by-index.dlt &&
	test_cmp d.dlt by-index.dlt &&
	printf "species,sepal,petal\nsetosa,1,0\nvirginica,3,4\nversicolor,1,0\nsetosa,3,4\n" >first.csv &&
	dlt-prep csv first.csv --label species -o first.dlt &&
	test_cmp d.dlt first.dlt &&
	printf "sepal,species,petal\n1,setosa,0\n3,virginica,4\n1,versicolor,0\n3,setosa,4\n" >mid.csv &&
	dlt-prep csv mid.csv -l 1 -o mid.dlt &&
	test_cmp d.dlt mid.dlt
'

test_expect_success 'csv: quotes, CRLF, spaces, blank lines, no final newline: same archive' '
	printf "\"sepal\",petal,\"species\"\r\n\r\n \"1\" , 0,setosa\r\n3,\"4\",\"virginica\"\r\n1,0,versicolor\r\n3 ,4,\"setosa\"\r\n\r\n\n" >messy.csv &&
	dlt-prep csv messy.csv --label species -o messy.dlt &&
	test_cmp d.dlt messy.dlt &&
	printf "sepal,petal,species\n1,0,setosa\n3,4,virginica\n1,0,versicolor\n3,4,setosa" >nonl.csv &&
	dlt-prep csv nonl.csv --label species -o nonl.dlt &&
	test_cmp d.dlt nonl.dlt
'

test_expect_success 'csv: quoted labels keep their commas, quotes and newlines' '
	printf "x,name\n1,\"a,b\"\n2,\"say \"\"hi\"\"\"\n3,\"two\nlines\"\n4,plain\n" >quoted.csv &&
	dlt-prep csv quoted.csv --label name -o q.dlt &&
	dlt-prep info --json q.dlt >info.json &&
	test "$(jget meta.n <info.json)" = 4 &&
	test "$(jget meta.classes <info.json)" = "[\"a,b\",\"plain\",\"say \\\"hi\\\"\",\"two\\nlines\"]"
'

test_expect_success 'csv: --header and --no-header override the guess' '
	printf "1,2,3\n4,5,6\n7,8,9\n" >num.csv &&
	dlt-prep csv num.csv --label 2 -o auto.dlt &&
	test "$(dlt-prep info --json auto.dlt | jget meta.n)" = 3 &&
	dlt-prep csv num.csv --label 2 --header -o h.dlt &&
	test "$(dlt-prep info --json h.dlt | jget meta.n)" = 2 &&
	dlt-prep csv num.csv --label 3 --header -o named.dlt &&
	test "$(dlt-prep info --json named.dlt | jget tensors.0.shape)" = "[2,2]" &&
	test "$(dlt-prep info --json named.dlt | jget counts)" = "[0,0,0,0,0,0,1,0,0,1]" &&
	test_must_fail 2 "iris.csv:1: column 0: not a number: '"'"'sepal'"'"'" \
		dlt-prep csv iris.csv --label 2 --no-header -o out/d.dlt &&
	is_empty out
'

test_expect_success 'csv: standard input in, standard output out' '
	dlt-prep csv - --label species -o stdin.dlt <iris.csv &&
	test_cmp d.dlt stdin.dlt &&
	dlt-prep csv iris.csv --label 2 -o - >stdout.dlt &&
	test_cmp d.dlt stdout.dlt &&
	dlt-prep csv iris.csv --label 2 -o - | dlt-prep info - >info.txt &&
	grep -q "^n: 4$" info.txt
'

test_expect_success 'csv: split keeps the class names and the stats of the first part' '
	dlt-prep csv iris.csv --label species --split 0.5 -o a.dlt -o b.dlt &&
	dlt-prep info --json a.dlt >a.json &&
	dlt-prep info --json b.dlt >b.json &&
	test "$(jget meta.n <a.json)" = 2 &&
	test "$(jget meta.n <b.json)" = 2 &&
	test "$(jget meta.classes <b.json)" = "[\"setosa\",\"versicolor\",\"virginica\"]" &&
	test "$(jget counts <b.json)" = "[1,1,0]" &&
	test "$(jget meta.mean <a.json)" = "[2,2]" &&
	test "$(jget meta.mean <b.json)" = "[2,2]" &&
	test "$(jget meta.std <b.json)" = "[1,2]"
'

test_expect_success 'csv --label none: every column a feature, no y, no classes' '
	cut -d, -f1,2 iris.csv >nolabel.csv &&
	dlt-prep csv nolabel.csv --label none -o n.dlt &&
	dlt-prep info --json n.dlt >info.json &&
	test "$(jget tensors <info.json | grep -o "\"name\"" | wc -l)" = 1 &&
	test "$(jget tensors.0.name <info.json)" = "\"x\"" &&
	test "$(jget tensors.0.shape <info.json)" = "[4,2]" &&
	test "$(jget meta.shape <info.json)" = "[2]" &&
	test "$(jget meta.num_classes <info.json)" = null &&
	test "$(jget meta.classes <info.json)" = null &&
	test "$(jget counts <info.json)" = null &&
	test "$(jget meta.mean <info.json)" = "[2,2]" &&
	test "$(jget meta.std <info.json)" = "[1,2]" &&
	tensor_bytes n.dlt x >x.bin &&
	perl -e "print pack(q(f<*), 1, 0, 3, 4, 1, 0, 3, 4)" >want.bin &&
	test_cmp want.bin x.bin &&
	dlt-prep info n.dlt >info.txt &&
	grep -q "^labels: none$" info.txt &&
	! grep -q "^classes:" info.txt &&
	dlt-prep info d.dlt >info.txt &&
	! grep -q "^labels:" info.txt
'

test_expect_success 'csv --label none: header guessed from every cell; stdin, split, shuffle' '
	printf "1,0\n3,4\n1,0\n3,4\n" >nohdr.csv &&
	dlt-prep csv nohdr.csv -l none -o nh.dlt &&
	test_cmp n.dlt nh.dlt &&
	dlt-prep csv - -l none -o - <nolabel.csv >piped.dlt &&
	test_cmp n.dlt piped.dlt &&
	dlt-prep csv nolabel.csv -l none --shuffle --seed 3 --split 0.75 -o p1.dlt -o p2.dlt &&
	test "$(dlt-prep info --json p1.dlt | jget meta.n)" = 3 &&
	test "$(dlt-prep info --json p2.dlt | jget tensors.0.shape)" = "[1,2]" &&
	printf "5\n6\n" >onecol.csv &&
	dlt-prep csv onecol.csv -l none -o one.dlt &&
	test "$(dlt-prep info --json one.dlt | jget tensors.0.shape)" = "[2,1]"
'

test_expect_success 'csv --label none: a column named none is chosen by index' '
	printf "a,none\n1,0\n2,1\n" >named.csv &&
	dlt-prep csv named.csv -l 1 -o named1.dlt &&
	test "$(dlt-prep info --json named1.dlt | jget counts)" = "[1,1]" &&
	dlt-prep csv named.csv -l none -o named2.dlt &&
	test "$(dlt-prep info --json named2.dlt | jget tensors.0.shape)" = "[2,2]"
'

test_expect_success 'csv --label none: bad input still names file and line' '
	printf "1,2\n3\n" >ragged2.csv &&
	test_must_fail 2 "ragged2.csv:2: expected 2 fields, got 1" \
		dlt-prep csv ragged2.csv -l none -o out/d.dlt &&
	head -1 iris.csv >hdronly.csv &&
	test_must_fail 2 "hdronly.csv: no data rows" dlt-prep csv hdronly.csv -l none -o out/d.dlt &&
	printf "a,b\n1,x\n" >nn.csv &&
	test_must_fail 2 "nn.csv:2: column '"'"'b'"'"': not a number: '"'"'x'"'"'" \
		dlt-prep csv nn.csv -l none -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad input: a ragged row names file and line' '
	printf "a,b,y\n1,2,0\n\n3,1\n" >ragged.csv &&
	test_must_fail 2 "ragged.csv:4: expected 3 fields, got 2" \
		dlt-prep csv ragged.csv --label y -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad input: a cell that is not a number names column and value' '
	printf "sepal,petal,species\n1,2,a\n1,abc,b\n" >nan.csv &&
	test_must_fail 2 "nan.csv:3: column '"'"'petal'"'"': not a number: '"'"'abc'"'"'" \
		dlt-prep csv nan.csv --label species -o out/d.dlt &&
	printf "1,2,0\n1,,1\n" >hole.csv &&
	test_must_fail 2 "hole.csv:2: column 1: not a number: '"''"'" \
		dlt-prep csv hole.csv --label 2 -o out/d.dlt &&
	printf "1,2,0\n1,inf,1\n" >inf.csv &&
	test_must_fail 2 "inf.csv:2: column 1: not a number: '"'"'inf'"'"'" \
		dlt-prep csv inf.csv --label 2 -o out/d.dlt &&
	printf "1,2,0\n1,1e39,1\n" >big.csv &&
	test_must_fail 2 "big.csv:2: column 1: not a number: '"'"'1e39'"'"'" \
		dlt-prep csv big.csv --label 2 -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad input: the label column must exist' '
	test_must_fail 2 "iris.csv: unknown label column '"'"'colour'"'"'" \
		dlt-prep csv iris.csv --label colour -o out/d.dlt &&
	test_must_fail 2 "iris.csv: label column 3 out of range: 3 columns" \
		dlt-prep csv iris.csv --label 3 -o out/d.dlt &&
	test_must_fail 2 "num.csv: no header row to find label column '"'"'y'"'"' in" \
		dlt-prep csv num.csv --label y -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad input: empty, header only, one column, open quote, empty label, NUL' '
	: >empty.csv &&
	test_must_fail 2 "empty.csv: empty file" dlt-prep csv empty.csv --label 0 -o out/d.dlt &&
	printf "\n\r\n" >blank.csv &&
	test_must_fail 2 "blank.csv: empty file" dlt-prep csv blank.csv --label 0 -o out/d.dlt &&
	head -1 iris.csv >header.csv &&
	test_must_fail 2 "header.csv: no data rows" \
		dlt-prep csv header.csv --label species -o out/d.dlt &&
	printf "1\n2\n" >one.csv &&
	test_must_fail 2 "one.csv: no feature columns" dlt-prep csv one.csv --label 0 -o out/d.dlt &&
	printf "a,y\n1,0\n2,\"1\n" >open.csv &&
	test_must_fail 2 "open.csv:3: unterminated quoted field" \
		dlt-prep csv open.csv --label y -o out/d.dlt &&
	printf "a,y\n1,0\n2,\n" >nolabel.csv &&
	test_must_fail 2 "nolabel.csv:3: empty label" \
		dlt-prep csv nolabel.csv --label y -o out/d.dlt &&
	printf "a,y\n1,\"0\"x\n" >after.csv &&
	test_must_fail 2 "after.csv:2: unexpected '"'"'x'"'"' after a quoted field" \
		dlt-prep csv after.csv --label y -o out/d.dlt &&
	printf "1,2,0\n1\0009,3,1\n" >nul.csv &&
	test_must_fail 2 "nul.csv: not a text file" dlt-prep csv nul.csv --label 2 -o out/d.dlt &&
	test_must_fail 2 "nosuch.csv: No such file or directory" \
		dlt-prep csv nosuch.csv --label y -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad input: a class id too large for an output layer' '
	printf "1,0\n2,1048576\n" >huge.csv &&
	test_must_fail 2 "huge.csv:2: label too large: at most 1048576 classes" \
		dlt-prep csv huge.csv --label 1 -o out/d.dlt &&
	is_empty out
'
test_expect_success '-o to a pipe or device writes through it and leaves it one' '
	blobs_csv >dn.csv &&
	mkfifo fifo &&
	{ cat fifo >through.dlt & } &&
	dlt-prep csv -q -l kind -o fifo dn.csv && wait &&
	test -p fifo &&
	dlt-prep csv -q -l kind -o direct.dlt dn.csv &&
	cmp direct.dlt through.dlt
'

# houses: two features, two float targets, two 0/1 labels
cat >houses.csv <<'EOF'
rooms,age,price,tax,garden,garage
3,10,250.5,2.5,1,0
4,20,310.25,3.5,0,0
2,5,180.75,1.5,1,1
5,40,400.5,4.5,0,1
EOF

test_expect_success 'csv --target: float targets f32 [N,K] in the order given, out of x' '
	dlt-prep csv houses.csv --target price,tax -o t.dlt &&
	dlt-prep info --json t.dlt >info.json &&
	test "$(jget tensors.0.shape <info.json)" = "[4,4]" &&
	test "$(jget tensors.1.name <info.json)" = "\"y\"" &&
	test "$(jget tensors.1.dtype <info.json)" = "\"f32\"" &&
	test "$(jget tensors.1.shape <info.json)" = "[4,2]" &&
	test "$(jget meta.targets <info.json)" = "[\"price\",\"tax\"]" &&
	test "$(jget meta.num_classes <info.json)" = null &&
	test "$(jget meta.target_mean.1 <info.json)" = 3 &&
	approx "$(jget meta.target_std.1 <info.json)" "$(perl -e "print sqrt(1.25)")" &&
	test "$(jget target_min <info.json)" = "[180.75,1.5]" &&
	test "$(jget target_max <info.json)" = "[400.5,4.5]" &&
	tensor_bytes t.dlt x >x.bin &&
	perl -e "print pack(q(f<*), 3,10,1,0, 4,20,0,0, 2,5,1,1, 5,40,0,1)" >want.bin &&
	test_cmp want.bin x.bin &&
	tensor_bytes t.dlt y >y.bin &&
	perl -e "print pack(q(f<*), 250.5,2.5, 310.25,3.5, 180.75,1.5, 400.5,4.5)" >want.bin &&
	test_cmp want.bin y.bin &&
	dlt-prep info t.dlt >info.txt &&
	grep -q "^targets:$" info.txt &&
	grep -q "^      1             3       1.11803           1.5           4.5  tax$" info.txt &&
	! grep -q "^target_mean:" info.txt
'

test_expect_success 'csv --target: one column, by index, without a header: no names' '
	tail -n +2 houses.csv >noh.csv &&
	dlt-prep csv noh.csv --target 2 -o t1.dlt &&
	dlt-prep info --json t1.dlt >info.json &&
	test "$(jget tensors.0.shape <info.json)" = "[4,5]" &&
	test "$(jget tensors.1.shape <info.json)" = "[4,1]" &&
	test "$(jget meta.targets <info.json)" = null &&
	test "$(jget meta.target_mean <info.json)" = "[285.5]" &&
	dlt-prep csv houses.csv --target 2 -o t2.dlt &&
	test "$(dlt-prep info --json t2.dlt | jget meta.targets)" = "[\"price\"]"
'

test_expect_success 'csv --labels: 0/1 columns as multi-hot u8 [N,K], their names and counts' '
	dlt-prep csv houses.csv --labels garden,garage -o l.dlt &&
	dlt-prep info --json l.dlt >info.json &&
	test "$(jget tensors.0.shape <info.json)" = "[4,4]" &&
	test "$(jget tensors.1.dtype <info.json)" = "\"u8\"" &&
	test "$(jget tensors.1.shape <info.json)" = "[4,2]" &&
	test "$(jget meta.labels <info.json)" = "[\"garden\",\"garage\"]" &&
	test "$(jget positives <info.json)" = "[2,2]" &&
	test "$(jget meta.target_mean <info.json)" = null &&
	tensor_bytes l.dlt y >y.bin &&
	perl -e "print pack(q(C*), 1,0, 0,0, 1,1, 0,1)" >want.bin &&
	test_cmp want.bin y.bin &&
	dlt-prep info l.dlt >info.txt &&
	grep -q "^labels:$" info.txt &&
	grep -q "^      1           2  garage$" info.txt &&
	dlt-prep csv houses.csv --labels garden,garage --split 0.5 -o l1.dlt -o l2.dlt &&
	test "$(dlt-prep info --json l2.dlt | jget positives)" = "[1,2]"
'

test_expect_success 'csv --labels: a cell other than 0 or 1 names file, line and column' '
	printf "a,b,c\n1,0,1\n2,2,0\n" >two.csv &&
	test_must_fail 2 "dlt-prep: two.csv:3: column '"'"'b'"'"': not 0 or 1: '"'"'2'"'"'" \
		dlt-prep csv two.csv --labels b,c -o out/d.dlt &&
	printf "a,b\n1,yes\n" >yes.csv &&
	test_must_fail 2 "dlt-prep: yes.csv:2: column '"'"'b'"'"': not 0 or 1: '"'"'yes'"'"'" \
		dlt-prep csv yes.csv --labels b -o out/d.dlt &&
	printf "a,p\n1,abc\n" >tnan.csv &&
	test_must_fail 2 "dlt-prep: tnan.csv:2: column '"'"'p'"'"': not a number: '"'"'abc'"'"'" \
		dlt-prep csv tnan.csv --target p -o out/d.dlt &&
	is_empty out
'

test_expect_success 'csv --target, --labels: unknown, repeated and all columns' '
	test_must_fail 2 "dlt-prep: houses.csv: unknown target column '"'"'value'"'"'" \
		dlt-prep csv houses.csv --target price,value -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: houses.csv: label column 9 out of range: 6 columns" \
		dlt-prep csv houses.csv --labels garden,9 -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: houses.csv: target column '"'"'2'"'"' given twice" \
		dlt-prep csv houses.csv --target price,2 -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: houses.csv: an empty target column name in '"'"'price,'"'"'" \
		dlt-prep csv houses.csv --target price, -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: houses.csv: no feature columns besides the targets" \
		dlt-prep csv houses.csv --target 0,1,2,3,4,5 -o out/d.dlt &&
	is_empty out
'

# The trap of issue 27: measurements as a label column, one class per value
test_expect_success 'csv -l: a label column that looks continuous is refused, naming --target' '
	test_must_fail 2 "dlt-prep: houses.csv: label column '"'"'price'"'"' looks continuous (4 of 4 values distinct, most not integers): --target price for regression, or --classes to make them classes" \
		dlt-prep csv houses.csv -l price -o out/d.dlt &&
	tail -n +2 houses.csv >noh2.csv &&
	test_must_fail 2 "label column '"'"'2'"'"' looks continuous (4 of 4 values distinct, most not integers): --target 2 for" \
		dlt-prep csv noh2.csv -l 2 -o out/d.dlt &&
	is_empty out &&
	dlt-prep csv houses.csv -l price --classes -o forced.dlt &&
	test "$(dlt-prep info --json forced.dlt | jget meta.num_classes)" = 4
'

test_expect_success 'csv -l: what does not look continuous stays classes' '
	printf "a,y\n1,0.5\n2,0.5\n3,1.5\n4,1.5\n" >few.csv &&
	dlt-prep csv few.csv -l y -o few.dlt &&
	test "$(dlt-prep info --json few.dlt | jget meta.classes)" = "[\"0.5\",\"1.5\"]" &&
	printf "a,y\n1,1.0\n2,2.0\n3,3.0\n" >whole.csv &&
	dlt-prep csv whole.csv -l y -o whole.dlt &&
	test "$(dlt-prep info --json whole.dlt | jget meta.num_classes)" = 3 &&
	printf "a,y\n1,-1.5\n2,-2.5\n3,x\n" >mixed.csv &&
	dlt-prep csv mixed.csv -l y -o mixed.dlt
'

test_expect_success 'csv usage: exactly one of -l, --target, --labels; --classes with -l' '
	test_must_fail 2 "csv needs --label COL, --target COLS or --labels COLS" \
		dlt-prep csv houses.csv -o out/d.dlt &&
	test_must_fail 2 "--label, --target and --labels exclude each other" \
		dlt-prep csv houses.csv -l price --target tax -o out/d.dlt &&
	test_must_fail 2 "--label, --target and --labels exclude each other" \
		dlt-prep csv houses.csv --labels garden --target tax -o out/d.dlt &&
	test_must_fail 2 "--classes needs --label COL" \
		dlt-prep csv houses.csv --target tax --classes -o out/d.dlt &&
	test_must_fail 2 "--classes needs --label COL" \
		dlt-prep csv houses.csv -l none --classes -o out/d.dlt &&
	is_empty out
'
test_done

#!/bin/sh
# Regression on real data: scikit-learn's diabetes table (442 patients, 10
# columns, a disease progression score; Debian's python3-sklearn ships it)
# through dlt-prep csv --target, an MLP trained by dlt-train, its test
# metrics in the target's units, and dlt-infer's predictions in them too.
# The quick form of bench/tasks, which compares the same with PyTorch.
. "$(dirname "$0")/lib.sh"
. "$DATA/prep/lib-prep.sh"

# scikit-learn from the python3 the tests run, or Debian's
PY=
for py in python3 /usr/bin/python3; do
	if "$py" -c "import sklearn.datasets" 2>/dev/null; then
		PY=$py
		break
	fi
done
skip="# skip: no scikit-learn (python3-sklearn)"
test_sklearn() {
	if test -n "$PY"; then
		test_expect_success "$1" "$2"
	else
		test_count=$((test_count + 1))
		echo "ok $test_count $skip"
	fi
}

# done_metric RUNDIR NAME: NAME (e.g. test.rmse) of the run's done record
done_metric() {
	sed -n "s/^{\"event\":\"done\",.*\"$2\":\([-+0-9.eE]*\)[,}].*/\1/p" "$1/metrics.jsonl"
}

# the whole table in its original units, every column a number
cat >diabetes.py <<'EOF'
from sklearn.datasets import load_diabetes
d = load_diabetes(scaled=False)
print(",".join(d.feature_names) + ",y")
for x, t in zip(d.data, d.target):
    print(",".join("%.10g" % v for v in x) + ",%.10g" % t)
EOF
cat >mlp.yaml <<'EOF'
data: {train: train.dlt, test: test.dlt}
model: [{dense: 64}, relu, {dense: 64}, relu, {dense: 1}]
train: {epochs: 20, batch: 32, seed: 1, optimizer: {adam: {lr: 1e-3}}}
EOF

test_sklearn 'diabetes: dlt-prep csv --target makes y f32 [N,1] and its stats' '
	"$PY" diabetes.py >diabetes.csv &&
	test $(wc -l <diabetes.csv) = 443 &&
	dlt-prep csv -q diabetes.csv --target y --shuffle --seed 1 --split 0.8 \
		-o train.dlt -o test.dlt &&
	dlt-prep info --json train.dlt >info.json &&
	test "$(jget tensors.1.name <info.json)" = "\"y\"" &&
	test "$(jget tensors.1.dtype <info.json)" = "\"f32\"" &&
	test "$(jget tensors.1.shape <info.json)" = "[354,1]" &&
	test "$(jget meta.targets <info.json)" = "[\"y\"]" &&
	m=$(jget meta.target_mean.0 <info.json) &&
	s=$(jget meta.target_std.0 <info.json) &&
	echo "train target mean $m std $s" &&
	perl -e "exit !(\$ARGV[0] > 130 && \$ARGV[0] < 175 && \$ARGV[1] > 65 && \$ARGV[1] < 90)" \
		"$m" "$s" &&
	dlt-prep info --json test.dlt >info.json &&
	test "$(jget tensors.1.shape <info.json)" = "[88,1]"
'

for seed in 1 2; do
	test_sklearn "diabetes: MLP seed $seed: test rmse < 65 and r2 > 0.3 (units of y)" '
		dlt-train -q -c mlp.yaml -o run'$seed' -s train.seed='$seed' >out &&
		rmse=$(done_metric run'$seed' test.rmse) &&
		r2=$(done_metric run'$seed' test.r2) &&
		mae=$(done_metric run'$seed' test.mae) &&
		echo "test rmse $rmse mae $mae r2 $r2" &&
		grep -q "^test rmse: " out &&
		perl -e "exit !(\$ARGV[0] < 65 && \$ARGV[1] > 0.3 && \$ARGV[2] < \$ARGV[0])" \
			"$rmse" "$r2" "$mae" &&
		grep -q "\"event\":\"eval\",\"split\":\"test\",.*\"loss\":.*\"rmse\":.*\"mae\":.*\"r2\":" \
			run'$seed'/metrics.jsonl
	'
done

test_sklearn 'diabetes: dlt-infer predicts in the units of y; its rmse is the run'"'"'s' '
	dlt-infer -m run1/model.dlt test.dlt >pred.csv 2>err &&
	test "$(head -1 pred.csv)" = "index,pred,target" &&
	test $(wc -l <pred.csv) = 89 &&
	dlt-prep info --json train.dlt >info.json &&
	M=$(jget meta.target_mean.0 <info.json) RMSE=$(done_metric run1 test.rmse) \
	perl -F, -lane "
		next if \$. == 1;
		\$p += \$F[1]; \$t += \$F[2]; \$e += (\$F[1] - \$F[2]) ** 2; \$n++;
		END {
			(\$p, \$t, \$e) = (\$p / \$n, \$t / \$n, sqrt(\$e / \$n));
			(\$m, \$r) = (\$ENV{M}, \$ENV{RMSE});
			print qq(mean prediction \$p, of the targets \$t, training \$m; rmse \$e, run \$r);
			exit !(abs(\$p - \$t) < 30 && abs(\$p - \$m) < 30 && abs(\$e - \$r) < 1e-3 * \$r);
		}" pred.csv &&
	grep -q "^rmse: " err
'

test_done

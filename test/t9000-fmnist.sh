#!/bin/sh
# End to end on real data: the Fashion-MNIST test set (Debian's
# dataset-fashion-mnist), split 80/20, an MLP for three epochs.
. "$(dirname "$0")/lib.sh"
src=/usr/share/datasets/fashion-mnist

cat >mlp.yaml <<'YAML'
data: {train: a.dlt, test: b.dlt}
model: [flatten, {dense: 128}, relu, {dense: 10}]
train: {epochs: 3, batch: 64, seed: 1, optimizer: {adam: {lr: 1e-3}}}
YAML

test_expect_success 'prepare the 10000 test images, split 8000/2000' '
	dlt-prep idx $src/t10k-images-idx3-ubyte.gz $src/t10k-labels-idx1-ubyte.gz \
		--shuffle --seed 3 --split 0.8 -o a.dlt -o b.dlt &&
	dlt-prep info --json a.dlt | grep -q "\"n\":8000" &&
	dlt-prep info --json b.dlt | grep -q "\"n\":2000"
'

test_expect_success 'an MLP reaches 80% test accuracy in three epochs (0.83 here)' '
	dlt-train -c mlp.yaml -o run >out.txt &&
	acc=$(sed -n "s/^test accuracy: //p" out.txt) &&
	echo "test accuracy $acc" &&
	perl -e "exit !($acc >= 0.80)"
'
test_done

#!/bin/sh
# The same GPT with the same weights gives PyTorch's logits, loss and
# gradients (issue 28): a dlt GPT (2 blocks of causal attention with 2
# heads, C 32, T 16, a vocabulary of 256, GELU tanh, a head tied to the
# embedding) exported by dlt-ckpt export -f safetensors, loaded into
# GPT-2 written in PyTorch (test/py/gpt-torch.py, in float64), run on
# the same windows as test-gpt-torch --dump's forward, loss and backward
# of one step: logits within 1e-4, the loss within 1e-5, every gradient
# within 1e-4 relative L2.  Weights of train.init gpt2, of the default
# init, and of a model trained by dlt-train (layernorms and biases away
# from 1 and 0, which neither init has).  Skipped where no python3 can
# import torch (Debian's python3-torch).
. "$(dirname "$0")/lib.sh"

DUMP="$BUILD/test/test-gpt-torch"
GPT_TORCH="$ROOT/test/py/gpt-torch.py"
PY=
for py in python3 /usr/bin/python3; do
	if "$py" -c "import torch" 2>/dev/null; then
		PY=$py
		break
	fi
done
test_torch() {
	if test -n "$PY"; then
		test_expect_success "$1" "$2"
	else
		test_count=$((test_count + 1))
		echo "ok $test_count # skip: no PyTorch (python3 -c 'import torch' fails; python3-torch)"
	fi
}

cat >gpt.yaml <<'YAML'
data: {train: train.dlt}
model:
  - embedding: {vocab: 256, dim: 32, name: wte}
  - positional: {max: 16}
  - residual: [layernorm, attention: {heads: 2}]
  - residual: [layernorm, dense: 128, gelu: tanh, dense: 32]
  - residual: [layernorm, attention: {heads: 2}]
  - residual: [layernorm, dense: 128, gelu: tanh, dense: 32]
  - layernorm
  - dense: {tie: wte, bias: false}
train:
  steps: 40
  context: 16
  batch: 8
  seed: 3
  init: gpt2
  log_every: 20
  optimizer: {adamw: {lr: 1e-2, weight_decay: 0.1}}
YAML

# English-like text for the trained model
perl -e 'srand(7); my @w = qw(the a program of to is in computer that it and for
	you be with as on not this are data science was by or if);
	for (1 .. 3000) { print $w[int(rand(@w))], rand() < 0.1 ? ".\n" : " " }' >text

# compare NAME MODEL: PyTorch against the dump in NAME/ for the weights
# of the model file MODEL, exported; the measurements in NAME.txt
compare() {
	dlt-ckpt export -f safetensors -o "$1.safetensors" "$2" &&
	"$PY" "$GPT_TORCH" "$1.safetensors" "$1" >"$1.txt" || { cat "$1.txt"; return 1; }
}

test_torch 'train.init gpt2: the logits, the loss and every gradient of PyTorch' '
	"$DUMP" --dump gpt2 gpt.yaml && compare gpt2 gpt2/model.dlt &&
	grep -q "^shape: B 8 T 16 V 256 C 32 heads 2 blocks 2 mlp 128 eps 1e-05$" gpt2.txt &&
	test $(grep -c "^grad " gpt2.txt) = 28
'

test_torch 'the default init (embeddings N(0, 1): logits of tens): PyTorch'"'"'s too' '
	sed "s/init: gpt2/init: default/" gpt.yaml >default.yaml &&
	"$DUMP" --dump default default.yaml && compare default default/model.dlt
'

test_torch 'a model trained by dlt-train, exported as it is: PyTorch'"'"'s' '
	dlt-prep text text -o train.dlt &&
	dlt-train -c gpt.yaml -o run -q >/dev/null &&
	"$DUMP" --dump trained run/config.yaml run/model.dlt && compare trained run/model.dlt &&
	dlt-ckpt diff trained/model.dlt run/model.dlt >/dev/null
'

test_torch 'a model of another shape than GPT-2'"'"'s is refused by name' '
	sed "s/gelu: tanh/relu/" gpt.yaml >relu.yaml &&
	"$DUMP" --dump relu relu.yaml &&
	dlt-ckpt export -f safetensors -o relu.safetensors relu/model.dlt &&
	{ "$PY" "$GPT_TORCH" relu.safetensors relu 2>err; test $? = 2; } &&
	grep "^gpt-torch.py: the config in the metadata has GELUs \[\], this GPT GELU tanh$" err
'

# the measurements, as TAP comments (prove -v shows them)
for f in gpt2.txt default.txt trained.txt; do
	test -f $f && sed -n "s/^\(logits\|loss\|grads\): /# ${f%.txt} \1: /p" $f
done

test_done

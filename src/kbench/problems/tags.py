"""The tag vocabulary: fusion-pattern classes and operator families. `kbench verify` rejects unknown tags."""

from __future__ import annotations

TAGS: dict[str, str] = {
    # fusion-pattern classes (level 2 and up)
    "gemm-epilogue": "matmul/linear followed by elementwise or reduction work that can run in its epilogue",
    "conv-epilogue": "convolution (incl. transposed, 3d) followed by elementwise or reduction work",
    "norm-act": "normalization followed by an activation or scaling",
    "reduction-chain": "reductions chained with elementwise work (sum/mean/max/logsumexp...)",
    "softmax": "softmax or log-softmax, alone or fused with its neighbours",
    "attention": "scaled dot-product attention or an attention block",
    "elementwise-chain": "several elementwise operators in a row (one pass over memory when fused)",
    "pool-epilogue": "pooling fused with neighbouring elementwise work",
    "residual": "residual/skip additions",
    "mlp": "stacked linear layers with activations",
    # operator families (level 1 mostly; also secondary tags)
    "matmul": "matrix multiplication (square, batched, skinny, transposed, matrix-vector)",
    "conv": "convolution (1d/2d/3d, transposed, depthwise, grouped, dilated, strided)",
    "activation": "pointwise activation functions",
    "norm": "batch/layer/group/instance/RMS normalization",
    "pooling": "max/average/adaptive pooling",
    "reduction": "sum/mean/max/min/argmax/argmin/prod reductions",
    "scan": "prefix operations (cumsum, cumprod)",
    "loss": "loss functions",
    "gather": "embedding lookups, index_select, gather/scatter",
    "elementwise": "single elementwise operator",
    # training (level 5): a forward and its backward, judged as one step
    "training": "forward and backward: outputs and gradients compared, the step timed",
    "optimizer": "an optimizer's update step (AdamW, SGD with momentum...)",
    "rope": "rotary position embeddings",
    "glu": "gated linear units (SwiGLU, GeGLU)",
    "dropout": "dropout with its mask given as an input",
    "cross-entropy": "cross-entropy over a vocabulary, its logits or their gradient never held whole",
    # architectures (level 3)
    "architecture": "a whole network or block",
    "cnn": "convolutional network",
    "transformer": "transformer block or model",
    "rnn": "recurrent network (LSTM, GRU)",
    "ssm": "state-space model (Mamba-style)",
}


def unknown_tags(tags: tuple[str, ...] | list[str]) -> list[str]:
    return [t for t in tags if t not in TAGS]

"""Graph view: group a reference's operators into the fusion groups a fused kernel could implement.

The model is traced with torch.fx and shapes are propagated on the meta device. Walking the graph in
order, a heavy operator (matmul, conv, attention) opens a group; elementwise operators, reductions and
normalizations join the group of the operator that produces their input (the epilogue); views are free.
An intermediate whose every consumer is inside its own group need never reach memory: a fused kernel
saves its write and its read back, 2 x its bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

HEAVY = {
    "linear", "bilinear", "conv1d", "conv2d", "conv3d", "convtranspose1d", "convtranspose2d", "convtranspose3d",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "matmul", "mm", "bmm", "addmm", "baddbmm",
    "einsum", "convolution", "scaled_dot_product_attention", "scaled_dot_product_flash_attention_for_cpu",
    "scaled_dot_product_efficient_attention", "scaled_dot_product_flash_attention", "multiheadattention", "lstm", "gru", "rnn", "embedding",
}  # fmt: skip
REDUCTION = {
    "sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "prod", "logsumexp", "softmax",
    "log_softmax", "logsoftmax", "cumsum", "cumprod", "norm", "var", "std", "batchnorm1d", "batchnorm2d",
    "batchnorm3d", "layernorm", "groupnorm", "instancenorm1d", "instancenorm2d", "instancenorm3d",
    "rmsnorm", "layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm", "maxpool1d",
    "maxpool2d", "maxpool3d", "avgpool1d", "avgpool2d", "avgpool3d", "adaptiveavgpool1d",
    "adaptiveavgpool2d", "adaptiveavgpool3d", "adaptivemaxpool2d", "max_pool2d", "avg_pool2d",
    "adaptive_avg_pool2d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "max_pool1d", "avg_pool1d",
    "native_layer_norm", "native_group_norm", "native_batch_norm", "native_batch_norm_legit",
    "native_batch_norm_legit_functional", "native_batch_norm_legit_no_training", "max_pool2d_with_indices",
    "max_pool3d_with_indices", "var_mean", "cross_entropy", "mse_loss", "kl_div", "nll_loss",
    "smooth_l1_loss", "cosine_similarity",
    "crossentropyloss", "mseloss", "softmax2d",
}  # fmt: skip
VIEW = {
    "view", "reshape", "permute", "transpose", "flatten", "unsqueeze", "squeeze", "expand", "t", "contiguous",
    "getitem", "size", "chunk", "split", "unflatten", "narrow", "select", "expand_as", "view_as", "flatten_",
    "dim", "unbind", "getattr", "unsafe_view", "alias", "detach", "slice", "clone", "lift_fresh_copy",
}  # fmt: skip


@dataclass
class FusionGroup:
    kind: str  # heavy+epilogue | heavy | reduction-chain | elementwise-chain | single
    ops: list[str]
    intermediates: list[tuple[str, int]] = field(default_factory=list)  # (node, bytes) a fused kernel skips

    @property
    def bytes_saved(self) -> int:
        return 2 * sum(b for _, b in self.intermediates)

    @property
    def fusable(self) -> bool:
        """At least two computing operators: something for a fused kernel to merge."""
        return len(self.ops) >= 2

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "ops": self.ops,
            "intermediates": [{"node": n, "bytes": b} for n, b in self.intermediates],
            "bytes_saved": self.bytes_saved,
        }


@dataclass
class GraphView:
    groups: list[FusionGroup] = field(default_factory=list)
    error: str = ""  # why the model could not be traced (data-dependent control flow ...)

    @property
    def fusion_groups(self) -> list[FusionGroup]:
        return [g for g in self.groups if g.fusable]

    @property
    def bytes_saved(self) -> int:
        return sum(g.bytes_saved for g in self.groups)

    def to_dict(self) -> dict[str, Any]:
        return {
            "groups": [g.to_dict() for g in self.groups],
            "fusion_groups": len(self.fusion_groups),
            "bytes_saved": self.bytes_saved,
            "error": self.error,
        }


def op_name(node: Any, modules: dict[str, Any]) -> str:
    if node.op == "call_module":
        return type(modules[node.target]).__name__.lower()
    if node.op == "call_function":
        target = getattr(node.target, "overloadpacket", node.target)  # aten ops from make_fx
        return str(getattr(target, "__name__", target)).lower().lstrip("_")
    return str(node.target).lower().rstrip("_") if node.op == "call_method" else node.op


def op_class(name: str) -> str:
    if name in HEAVY:
        return "heavy"
    if name in REDUCTION:
        return "reduction"
    if name in VIEW:
        return "view"
    return "elementwise"


def _node_bytes(node: Any) -> int:
    meta = node.meta.get("tensor_meta", node.meta.get("val"))
    if meta is None or not hasattr(meta, "shape"):
        return 0
    import torch

    numel = 1
    for s in meta.shape:
        numel *= int(s)
    return numel * torch.empty((), dtype=meta.dtype).element_size()


def _holds_tensor(meta: Any) -> bool:
    """A tensor's metadata, or a tuple holding one (torch.min(x, dim) returns values and indices)."""
    if hasattr(meta, "shape"):
        return True
    return isinstance(meta, list | tuple) and any(_holds_tensor(m) for m in meta)


def _assign_groups(gm: Any) -> tuple[dict[Any, int], list[list[Any]]]:
    modules = dict(gm.named_modules())
    group_of: dict[Any, int] = {}
    groups: list[list[Any]] = []
    data = set()  # tensors computed from the inputs; the rest (masks, shape arithmetic) are constants
    has_meta = any("tensor_meta" in n.meta or "val" in n.meta for n in gm.graph.nodes)
    for node in gm.graph.nodes:
        tensor = not has_meta or _holds_tensor(node.meta.get("tensor_meta", node.meta.get("val")))
        if tensor and (node.op == "placeholder" or any(n in data for n in node.all_input_nodes)):
            data.add(node)
        if node.op not in ("call_module", "call_function", "call_method") or node not in data:
            continue
        cls = op_class(op_name(node, modules))
        producers = [group_of[n] for n in node.all_input_nodes if n in group_of]
        if cls == "heavy" or not producers:
            group_of[node] = len(groups)
            groups.append([node])
        else:  # epilogue: join the most recent producing group
            gid = max(producers)
            group_of[node] = gid
            groups[gid].append(node)
    return group_of, groups


def _kind(classes: list[str]) -> str:
    computing = [c for c in classes if c != "view"]
    if "heavy" in computing:
        return "heavy+epilogue" if len(computing) > 1 else "heavy"
    if len(computing) <= 1:
        return "single"
    return "reduction-chain" if "reduction" in computing else "elementwise-chain"


def group_graph(gm: Any) -> GraphView:
    """Fusion groups of a traced GraphModule whose nodes carry `tensor_meta` (from ShapeProp)."""
    modules = dict(gm.named_modules())
    group_of, groups = _assign_groups(gm)
    view = GraphView()
    for gid, nodes in enumerate(groups):
        names = [op_name(n, modules) for n in nodes]
        classes = [op_class(n) for n in names]
        group = FusionGroup(_kind(classes), [n for n, c in zip(names, classes, strict=True) if c != "view"])
        for node, cls in zip(nodes, classes, strict=True):
            users = list(node.users)
            internal = users and all(group_of.get(u) == gid for u in users)
            if internal and cls != "view":
                group.intermediates.append((node.name, _node_bytes(node)))
        if group.ops:
            view.groups.append(group)
    return view


def trace_groups(model: Any, inputs: list[Any]) -> GraphView:
    """Trace `model` with torch.fx, propagate shapes (on the inputs' device, meta works) and group it."""
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    try:
        gm = torch.fx.symbolic_trace(model)
    except Exception:  # shape-dependent Python (torch.ones(n, n) on a traced size): trace at the aten level
        return _trace_aten(model, inputs)
    try:
        ShapeProp(gm).propagate(*inputs)
    except Exception as exc:  # shapes are only for bytes; the grouping stands without them
        view = group_graph(gm)
        view.error = f"shape propagation failed ({type(exc).__name__}); bytes saved unknown"
        return view
    return group_graph(gm)


def _trace_aten(model: Any, inputs: list[Any]) -> GraphView:
    """Fallback for forwards torch.fx cannot trace symbolically: record the aten ops of a real run."""
    from torch.fx.experimental.proxy_tensor import make_fx

    try:
        gm = make_fx(lambda *args: model(*args))(*inputs)
    except Exception as exc:  # data-dependent control flow: reported in the view, not raised
        return GraphView(error=f"could not trace the model: {type(exc).__name__}: {exc}")
    return group_graph(gm)

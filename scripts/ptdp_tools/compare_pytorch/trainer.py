"""One ptdp iteration in PyTorch: the learning-rate schedule (Megatron's) and the optimizer step
(micro-batch accumulation, f32 master weights, global-norm clipping, AdamW)."""

from __future__ import annotations

import math


def lr_at(num_steps: int, max_lr: float, min_lr: float, warmup: int, decay: int) -> float:
    """Megatron's OptimizerParamScheduler.get_lr (cosine style, init_lr 0) after num_steps optimizer
    steps: iteration k (1-based) runs at lr_at(k - 1), so the first iteration of a warm-up runs at
    0. decay 0: constant max_lr after the warm-up (ptdp refuses 0 < decay <= warmup)."""
    if warmup > 0 and num_steps <= warmup:
        return max_lr * num_steps / warmup
    if decay <= warmup:
        return max_lr
    if num_steps > decay:
        return min_lr
    ratio = (num_steps - warmup) / (decay - warmup)
    return min_lr + 0.5 * (math.cos(math.pi * ratio) + 1.0) * (max_lr - min_lr)


class Trainer:
    """One ptdp iteration in PyTorch: micro-batches accumulate d(mean loss), f32 master weights
    (a copy when the model is bf16/f16), global-norm clipping as AdamW::step_with_norm, AdamW
    with decay on matrices only, the learning rate set from the schedule each step."""

    def __init__(self, torch, model, opt_args, fused=False, master_init=None):
        """master_init: ptdp's flat f32 master weights (its checkpoint), when the model is 16-bit."""
        self.torch, self.model, self.a = torch, model, opt_args
        named = model.ptdp_params()
        self.params = [p for _, p in named]
        self.copy_master = self.params[0].dtype != torch.float32
        if not self.copy_master:
            self.master = self.params
        elif master_init is not None and master_init.dtype == torch.float32:
            self.master = [torch.nn.Parameter(master_init[e.offset:e.offset + e.numel].view(e.shape).to(p.device).clone())
                           for e, p in zip(model.entries, self.params)]
        else:
            self.master = [torch.nn.Parameter(p.detach().float().clone()) for p in self.params]
        decay = {e.name for e in model.entries if e.decay}
        groups = [{"params": [m for (n, _), m in zip(named, self.master) if n in decay],
                   "weight_decay": opt_args.weight_decay},
                  {"params": [m for (n, _), m in zip(named, self.master) if n not in decay], "weight_decay": 0.0}]
        kwargs = {"fused": True} if fused else {}
        self.opt = torch.optim.AdamW(groups, lr=opt_args.lr, betas=(opt_args.adam_beta1, opt_args.adam_beta2),
                                     eps=opt_args.adam_eps, **kwargs)
        self.step_no = 0

    def step(self, microbatches, global_batch: int, seq: int):
        """microbatches: [(tokens, targets)]; returns (loss tensor, grad norm tensor, lr)."""
        torch, a = self.torch, self.a
        for p in self.params:
            p.grad = None
        loss_sum = None
        for tok, tgt in microbatches:
            loss = self.model(tok, tgt)
            (loss / (global_batch * seq)).backward()
            loss_sum = loss.detach() if loss_sum is None else loss_sum + loss.detach()
        if self.copy_master:
            for m, p in zip(self.master, self.params):
                m.grad = p.grad.float()
        grads = [m.grad for m in self.master]
        norm = torch.linalg.vector_norm(
            torch.stack([torch.linalg.vector_norm(g, 2, dtype=torch.float64) for g in grads]), 2)
        if a.clip_grad > 0:  # scale by clip / (norm + 1e-6) when that is below 1 (no host sync)
            coeff = torch.clamp(a.clip_grad / (norm + 1e-6), max=1.0).to(torch.float32)
            for g in grads:
                g.mul_(coeff)
        lr = lr_at(self.step_no, a.lr, a.min_lr, a.lr_warmup_iters, a.lr_decay_iters)  # steps done before this one
        self.step_no += 1
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.step()
        if self.copy_master:
            with torch.no_grad():
                for m, p in zip(self.master, self.params):
                    p.copy_(m)
        return loss_sum / (global_batch * seq), norm, lr

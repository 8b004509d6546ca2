"""The held-out loss: mean next-token loss over the run's first held-out sequences. The trainer
logs it every epoch and the snapshot command prints it for a stored snapshot; both compute it
the same way (same sequences, same micro-batches), so the figures compare exactly."""

import torch


@torch.no_grad()
def mean_loss(model, tokens: torch.Tensor, micro_batch_size: int) -> float:
    """The mean next-token loss over these sequences, one micro-batch at a time (eval mode)."""
    model.eval()
    losses = [model(input_ids=m, labels=m).loss.item() * len(m)
              for m in torch.split(tokens, micro_batch_size)]
    return sum(losses) / len(tokens)


def heldout_loss(model, heldout, sequences: int, micro_batch_size: int, device) -> float:
    n = min(sequences, heldout.index.num_sequences)
    tokens = torch.from_numpy(heldout.get_samples(0, n - 1)).to(device)
    return mean_loss(model, tokens, micro_batch_size)
